"""Image and array inputs within bounds (issue 30, point 6): decompression bombs, absurd sizes,
zero features, arrays whose headers ask for more than the memory ceiling and model options that
ask for impossible memory are refused up front with one line, exit 2, nothing created."""

from __future__ import annotations

import struct
import zlib

import numpy as np
import pytest
from click.testing import CliRunner

from robench.cli import cli

RUN = ["run", "-m", "centroid", "-c", "kmeans", "--metric", "rho", "-k", "2", "-r", "1",
       "--executor", "local"]


def png_header(width, height):
    """Return a PNG whose header claims ``width`` x ``height`` grey pixels (a few bytes of data)."""
    def chunk(kind, data):
        return (struct.pack(">I", len(data)) + kind + data
                + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))

    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 0, 0,
                                                             0, 0))
            + chunk(b"IDAT", zlib.compress(b"\x00" * 16)) + chunk(b"IEND", b""))


def npy_header(shape, dtype="<f4"):
    """Return an .npy file that claims ``shape`` and holds a few bytes."""
    header = repr({"descr": dtype, "fortran_order": False, "shape": tuple(shape)}).encode()
    header += b" " * (63 - (len(header) + 10) % 64) + b"\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header + b"\x00" * 16


@pytest.fixture
def images(tmp_path):
    from PIL import Image

    root = tmp_path / "images"
    for c in ("a", "b"):
        (root / c).mkdir(parents=True)
        for i in range(6):
            Image.fromarray(np.full((8, 8), 20 * i + (120 if c == "b" else 0), np.uint8)).save(
                root / c / f"{i}.png")
    return root


def refused(tmp_path, argv, message, env=None):
    db = tmp_path / "r.db"
    result = CliRunner().invoke(cli, [*argv, "--db", str(db)], env=env)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert result.exit_code == 2, (result.exit_code, result.output, result.stderr)
    errors = [ln for ln in result.stderr.splitlines() if ln.startswith("Error")]
    assert len(errors) == 1 and message in errors[0], result.stderr
    assert "Traceback" not in result.stderr
    assert not db.exists()


def test_a_decompression_bomb_is_refused(tmp_path, images, tiny_registry):
    (images / "a" / "bomb.png").write_bytes(png_header(40000, 40000))
    # before: DecompressionBombError traceback (only OSError was caught)
    refused(tmp_path, ["run", "-d", f"imagefolder:{images}", *RUN[1:]],
            "a decompression bomb")


@pytest.mark.parametrize("size", ["100000", "8193", "100000x8"])
def test_an_absurd_image_size_is_refused_before_any_image_is_read(tmp_path, images, size,
                                                                  tiny_registry):
    # before: size=100000 asked for memory without bound (the kernel killed the run)
    refused(tmp_path, ["run", "-d", f"imagefolder:{images}?size={size}", *RUN[1:]],
            "size must be N or HxW (integers from 1 to 8192)")


def test_images_past_the_memory_ceiling_are_refused(tmp_path, images, tiny_registry):
    refused(tmp_path, ["run", "-d", f"imagefolder:{images}?size=64", *RUN[1:]],
            "above the memory ceiling of 64.0 KiB", env={"ROBENCH_MEMORY_LIMIT": "64K"})


def test_an_array_whose_header_asks_too_much_is_refused_unread(tmp_path, tiny_registry):
    import zipfile

    path = tmp_path / "huge.npz"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("X.npy", npy_header((10**7, 10**6)))
        z.writestr("y.npy", npy_header((10**7,), "<i8"))
    refused(tmp_path, ["run", "-d", f"npz:{path}", *RUN[1:]], "above the memory ceiling")


def test_zero_features_are_refused(tmp_path, tiny_registry):
    path = tmp_path / "zero.npz"
    np.savez(path, X=np.zeros((30, 0)), y=np.arange(30) % 3)
    # before: accepted, and every trial failed
    refused(tmp_path, ["run", "-d", f"npz:{path}", *RUN[1:]], "X has no features")


def test_a_dataset_with_no_features_is_refused_by_the_container():
    from robench.data import Dataset, DatasetError

    with pytest.raises(DatasetError, match="has no features"):
        Dataset("x", np.zeros((4, 0)), np.array([0, 1, 0, 1]))


@pytest.mark.parametrize("option", ["min_size=1000000000000", "size=4096", "min_size=99999"])
def test_a_model_option_asking_impossible_memory_is_refused(tmp_path, option, tiny_registry):
    refused(tmp_path, ["run", "-d", "tiny", "-m", f"timm:resnet18?{option}", "--metric", "rho",
                       "-c", "kmeans", "--executor", "local"], "must be an integer from 1 to 2048")
