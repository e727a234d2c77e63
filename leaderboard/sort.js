// Sortable tables and sideways-scroll cues (progressive enhancement: without this script a
// table keeps its ranked order, and a wide table still scrolls inside its box with a shadow
// at the edge that has more).
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
  // The body column under each one-column header cell, across header rows with row and
  // column spans (an overview's headline groups span their columns).
  function columns(head) {
    var taken = [], out = [];
    Array.prototype.forEach.call(head.rows, function (row, r) {
      taken[r] = taken[r] || [];
      var c = 0;
      Array.prototype.forEach.call(row.cells, function (cell) {
        while (taken[r][c]) c++;
        for (var dr = 0; dr < cell.rowSpan; dr++) {
          taken[r + dr] = taken[r + dr] || [];
          for (var dc = 0; dc < cell.colSpan; dc++) taken[r + dr][c + dc] = true;
        }
        if (cell.colSpan === 1) out.push([cell, c]);
        c += cell.colSpan;
      });
    });
    return out;
  }
  document.querySelectorAll("table.sortable").forEach(function (table) {
    var head = table.tHead, body = table.tBodies[0];
    if (!head || !body) return;
    var sortable = columns(head);
    sortable.forEach(function (pair) {
      var th = pair[0], col = pair[1];
      var button = document.createElement("button");
      button.type = "button";
      button.className = "sort";
      while (th.firstChild) button.appendChild(th.firstChild);
      th.appendChild(button);
      button.addEventListener("click", function () {
        var descending = th.getAttribute("aria-sort") === "ascending";
        sortable.forEach(function (other) { other[0].removeAttribute("aria-sort"); });
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
  // A table wider than its box says so above it, and its box becomes a keyboard-focusable,
  // named region (arrow keys scroll it).
  function cue(box) {
    var hint = box.previousElementSibling;
    if (!hint || !hint.classList.contains("scroll-hint")) {
      hint = document.createElement("p");
      hint.className = "scroll-hint";
      hint.setAttribute("aria-hidden", "true");
      box.parentNode.insertBefore(hint, box);
    }
    var hidden = box.scrollWidth - box.clientWidth;
    var wide = hidden > 1;
    hint.hidden = !wide;
    if (wide) {
      hint.textContent = "\u2194 This table is wider than the screen: scroll it sideways "
        + "for more columns.";
      var caption = box.querySelector("caption");
      box.setAttribute("tabindex", "0");
      box.setAttribute("role", "region");
      box.setAttribute("aria-label", caption ? caption.textContent.trim()
                                             : "table (scrolls sideways)");
    } else {
      box.removeAttribute("tabindex");
      box.removeAttribute("role");
      box.removeAttribute("aria-label");
    }
  }
  function cues() { document.querySelectorAll(".scroll").forEach(cue); }
  cues();
  window.addEventListener("resize", cues);
  document.addEventListener("toggle", cues, true);  // a table inside <details> just opened
})();
