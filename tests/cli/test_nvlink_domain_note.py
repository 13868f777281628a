"""A GB200 log's hosts are the trays of one NVLink domain: `fit` and `predict` say so.

NCCL counts an NVLink domain spanning hosts (multi-node NVLink, a GB200 NVL72 rack of 18 trays of 4)
as one node: under MNNVL its topology is fused over the NVLink clique (NVIDIA/nccl src/graph/topo.cc,
"MNNVL clique support") and init.cc counts one node per ring graph. The published 1,440-rank GB200
log names its GPU and reaches device 3, so `fit` recorded 360 nodes (hosts), and `predict --ranks 72`
priced 18 nodes across NICs: 6.99-41.6 ms from 512 MiB to 8 GiB, where the 72-rank run published
1.81-20.0 ms; counted in racks (`fit --nodes 20`) it prices one node, 3.51-24.0 ms. Nothing said which.
"""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from collbench.cli.app import app
from collbench.models.fitted import Fit
from collbench.models.stored import fit_nvlink_domain_note

REAL = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "real"
GB200_1440 = REAL / "all_reduce_perf-gb200-1440rank-one-rank-line.log"  # 'NVIDIA GB200', device 3
GB200_72 = REAL / "all_reduce_perf-gb200-72rank-one-rank-line.log"  # 'NVIDIA Graphics Device', device 3
H100 = REAL / "all_reduce_perf-h100-2node-mpirun-gcp.log"


def _run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, list(args), env={"COLUMNS": "80", "NO_COLOR": "1"})
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    return result.exit_code, result.stdout, result.stderr


def _said(stderr: str) -> str:
    return " ".join(stderr.split())


def test_fit_of_a_gb200_log_counted_by_hosts_says_the_racks() -> None:
    code, _, err = _run("fit", str(GB200_1440))
    assert code == 0, err
    said = _said(err)
    assert "x1440: measured on 360 hosts, but GB200's NVLinks join the hosts of a rack (up to 72 GPUs)" in said
    assert "which NCCL counts as one node; if the run spanned 20 NVL72 racks, `fit --nodes 20` records" in said
    assert all(len(line) <= 80 for line in err.splitlines()), err


def test_fit_given_the_racks_and_other_gpus_say_nothing_of_it() -> None:
    code, out, err = _run("fit", str(GB200_1440), "--nodes", "20", "--json")
    assert code == 0, err
    assert '"nodes": 20' in out and "NVLinks join" not in err
    code, _, err = _run("fit", str(H100))  # 8 GPUs a host, NVLink within it: hosts are NCCL's nodes
    assert code == 0 and "NVLinks join" not in err, err


def test_predict_says_it_once_the_gpu_is_named_and_not_with_measured_nodes(tmp_path: Path) -> None:
    fits = tmp_path / "gb200-72.json"
    code, out, err = _run("fit", str(GB200_72), "--json")
    assert code == 0 and "NVLinks join" not in err, err  # its rank line names no GPU: nothing to say
    fits.write_text(out)
    code, out, err = _run("predict", "--fits", str(fits), "--ranks", "8", "--gpu", "GB200", "--sizes", "1G")
    assert code == 0, err
    assert "x72: measured on 18 hosts, but GB200's NVLinks join" in _said(err)
    # Its fits may be of rows or a profile, which `fit --nodes` does not take: --measured-nodes comes first.
    assert "spanned 1 NVL72 rack, `--measured-nodes 1` prices it so (`fit LOG --nodes 1` records it" in _said(err)
    # Told the rack, 8 ranks are one node of it, and nothing more is said of the hosts.
    code, out, err = _run(
        "predict", "--fits", str(fits), "--ranks", "8", "--gpu", "GB200", "--measured-nodes", "1", "--sizes", "1G"
    )
    assert code == 0 and "NVLinks join" not in err, err
    assert "predicted at 8 ranks on 1 node" in out, out


def test_the_note_follows_the_gpu_and_the_ranks_a_host() -> None:
    def fit(device: str, world: int) -> Fit:
        return Fit("all-reduce", "native", "nccl", world, 5.0, 2e-6, None, 1.0, 1.0, 1.0, 8, 1 << 30, device=device)

    assert fit_nvlink_domain_note(fit("NVIDIA GB300", 64), 16) is not None  # 16 trays of 4: one NVL72 rack's
    assert fit_nvlink_domain_note(fit("NVIDIA GB200", 144), 2) is None  # 72 a node: already racks
    assert fit_nvlink_domain_note(fit("NVIDIA GB200", 8), 1) is None  # one host: nothing crossed
    assert fit_nvlink_domain_note(fit("NVIDIA GB200", 8), None) is None  # nodes unknown: asked for elsewhere
    assert fit_nvlink_domain_note(fit("NVIDIA B200", 16), 2) is None  # HGX B200: NVLink within the host


def test_import_says_it_and_takes_the_racks(tmp_path: Path) -> None:
    code, out, err = _run("import", "nccl-tests", str(GB200_1440), "-O", str(tmp_path / "hosts.jsonl"))
    assert code == 0, err
    assert "all-reduce, 1440 ranks: measured on 360 hosts, but GB200's NVLinks join" in _said(err)
    assert "spanned 20 NVL72 racks, `--nodes 20` says so" in _said(err)
    code, out, err = _run("import", "nccl-tests", str(GB200_1440), "--nodes", "20", "-O", str(tmp_path / "r.jsonl"))
    assert code == 0 and "NVLinks join" not in err, err
    assert "1440 ranks on 20 nodes" in " ".join(out.split())


def test_fit_of_imported_rows_says_what_takes_the_racks(tmp_path: Path) -> None:
    # The rows record the 360 hosts, and `fit rows --nodes 20` refuses them ("its rows say 360 nodes"):
    # the note on them said `fit --nodes 20` all the same. It names what takes the racks for rows.
    rows = tmp_path / "hosts.jsonl"
    code, _, err = _run("import", "nccl-tests", str(GB200_1440), "-O", str(rows))
    assert code == 0, err
    code, _, err = _run("fit", str(rows), "--nodes", "20")
    assert code == 2 and "its rows say 360 nodes, not 20" in _said(err), err
    code, out, err = _run("fit", str(rows), "--json")
    assert code == 0, err
    said = _said(err)
    assert "spanned 20 NVL72 racks, `predict --measured-nodes 20` prices it so" in said
    assert "`import nccl-tests LOG --nodes 20`" in said and "`fit --nodes 20` records" not in said
    assert all(len(line) <= 80 for line in err.splitlines()), err
    fits = tmp_path / "fits.json"
    fits.write_text(out)
    code, out, err = _run("predict", "--fits", str(fits), "--ranks", "72", "--measured-nodes", "20", "--sizes", "1G")
    assert code == 0, err
    assert "predicted at 72 ranks on 1 node" in out, out


def test_fit_of_several_logs_says_to_give_each_its_racks_where_it_is_imported() -> None:
    # One `fit --nodes` gives every log the same count: the 1,440-rank log's 20 racks would make the
    # H100 log beside it 16 ranks on 20 nodes. Each log's racks go where it is imported.
    code, _, err = _run("fit", str(GB200_1440), str(H100))
    assert code == 0, err
    said = _said(err)
    assert "spanned 20 NVL72 racks, `import nccl-tests LOG --nodes 20` records that for its log" in said
    assert "`fit --nodes 20`" not in said
