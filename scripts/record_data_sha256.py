"""Record the sha256 of every data file the book reads outside data/lab/ in data/SHA256SUMS.

Run from the repository root after changing one of them by hand; the scripts that regenerate them record it
themselves. mha.data_files.read_verified_file refuses a listed file whose bytes differ. The lab's checkpoints and
results are recorded in data/lab/manifest.json instead, by the scripts that write them.
"""

from mha.data_files import record_sha256

if __name__ == "__main__":
    print(f"wrote {record_sha256()}")
