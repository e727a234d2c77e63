// Sortable tables (progressive enhancement: without this script a table keeps its ranked order).
(function () {
  function key(cell) {
    if (!cell) return null;
    var v = cell.getAttribute("data-value");
    var text = v !== null ? v : cell.textContent.trim();
    var n = parseFloat(text.replace(/[%,]/g, ""));
    return isNaN(n) ? text.toLowerCase() : n;
  }
  function compare(a, b) {
    if (a === b) return 0;
    if (a === null || a === "" || a === "\u2014") return 1;
    if (b === null || b === "" || b === "\u2014") return -1;
    if (typeof a === "number" && typeof b === "number") return a - b;
    if (typeof a === "number") return -1;
    if (typeof b === "number") return 1;
    return a < b ? -1 : 1;
  }
  document.querySelectorAll("table.sortable").forEach(function (table) {
    var head = table.tHead, body = table.tBodies[0];
    if (!head || !body || head.rows.length !== 1) return;
    Array.prototype.forEach.call(head.rows[0].cells, function (th, col) {
      if (th.colSpan !== 1) return;
      var button = document.createElement("button");
      button.type = "button";
      button.className = "sort";
      while (th.firstChild) button.appendChild(th.firstChild);
      th.appendChild(button);
      button.addEventListener("click", function () {
        var descending = th.getAttribute("aria-sort") === "ascending";
        Array.prototype.forEach.call(head.rows[0].cells, function (other) {
          other.removeAttribute("aria-sort");
        });
        th.setAttribute("aria-sort", descending ? "descending" : "ascending");
        var rows = Array.prototype.slice.call(body.rows);
        rows.sort(function (a, b) {
          var ka = key(a.cells[col]), kb = key(b.cells[col]);
          var missingA = ka === null || ka === "" || ka === "\u2014";
          var missingB = kb === null || kb === "" || kb === "\u2014";
          if (missingA || missingB) return missingA - missingB;
          var c = compare(ka, kb);
          return descending ? -c : c;
        });
        rows.forEach(function (row) { body.appendChild(row); });
      });
    });
  });
})();
