"""Several CUDA GPUs (docs/python.md, "Several GPUs"): the data-parallel example
(python/examples/ddp_train.py: two processes, kern.Context("cuda:RANK"), K.grad on each
shard, NCCL all-reduce) against one GPU's full-batch K.grad and NumPy; contexts on two GPUs
used from two threads at once; copies between GPUs; PyTorch tensors of GPU 1 in place.
Needs 2 CUDA GPUs: elsewhere every test is reported as skipped, with the reason (never as
passed). Run on the 2-GPU machine by `scripts/device-run.sh multigpu`."""

import importlib.util
import os
import subprocess
import sys
import warnings

import numpy as np
import pytest

import kern

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
EXAMPLE = os.path.join(ROOT, "python", "examples", "ddp_train.py")


def _why_not():
    """Why these tests cannot run here (None: they can). Each test is then reported as
    skipped with it (a skipped module would make pytest's status 5, a failure for
    scripts/device-run.sh on a one-GPU machine)."""
    try:
        import torch
    except ImportError:
        return "needs PyTorch"
    if torch.cuda.device_count() < 2:
        return ("needs 2 CUDA GPUs, torch sees %d (the 2-GPU machine: scripts/device-run.sh "
                "multigpu)" % torch.cuda.device_count())
    try:
        kern.Context("cuda:1")
    except kern.Error as e:
        return "kern has no CUDA device 1 here: %s" % e
    return None


WHY_NOT = _why_not()
pytestmark = pytest.mark.skipif(WHY_NOT is not None, reason=str(WHY_NOT))
if WHY_NOT is None:
    import torch
    _spec = importlib.util.spec_from_file_location("ddp_train", EXAMPLE)
    ddp = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(ddp)

N, D, STEPS, LR = 8192, 64, 20, 1.0  # the loss falls to about 0.36 of its start (NumPy)


def rel(a, b):
    return float(np.abs(np.asarray(a, np.float64) - b).max() / max(np.abs(b).max(), 1e-12))


def test_ddp_example_matches_one_gpu_and_numpy(tmp_path):
    if not torch.distributed.is_nccl_available():
        pytest.skip("PyTorch has no NCCL")
    package = os.path.dirname(os.path.dirname(os.path.abspath(kern.__file__)))  # this kern
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [package] + os.environ.get("PYTHONPATH", "").split(os.pathsep)))
    env.setdefault("NCCL_NVLS_ENABLE", "0")  # no NVLink multicast on the shared GPU machines
    r = subprocess.run([sys.executable, EXAMPLE, "--gpus", "2", "--steps", str(STEPS),
                        "--n", str(N), "--d", str(D), "--lr", str(LR), "--out", str(tmp_path)],
                       env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    ranks = [np.load(tmp_path / ("rank%d.npz" % i)) for i in range(2)]
    assert [int(f["index"]) for f in ranks] == [0, 1]  # each process on its own GPU
    assert [(int(f["lo"]), int(f["hi"])) for f in ranks] == [(0, N // 2), (N // 2, N)]
    # the all-reduced gradient is the same on both ranks, and so are the weights it trained
    np.testing.assert_array_equal(ranks[0]["gw"], ranks[1]["gw"])
    np.testing.assert_array_equal(ranks[0]["w"], ranks[1]["w"])

    x, y, w0, b0 = ddp.make_data(N, D)
    gw_np, gb_np = ddp.numpy_grad(x, y, w0, b0, 1.0 / N)
    (w1, b1), (gw1, gb1), losses1 = ddp.train(kern.Context("cuda:0"), x, y, w0, b0, STEPS, LR, N)
    assert rel(gw1, gw_np) < 1e-4 and rel(gb1, gb_np) < 1e-4  # one GPU against NumPy
    for f in ranks:
        assert rel(f["gw"], gw1) < 1e-4, "the all-reduced gradient against one GPU's"
        assert rel(f["gw"], gw_np) < 1e-4, "the all-reduced gradient against NumPy"
        assert rel(f["gb"], gb_np) < 1e-4
        assert rel(f["w"], w1) < 1e-4 and rel(f["b"], b1) < 1e-3, "weights after training"
        np.testing.assert_allclose(f["losses"], losses1, rtol=1e-4)
    assert losses1[-1] < 0.5 * losses1[0]  # it trains
    w, b = w0.astype(np.float64), b0.astype(np.float64)  # the same training in NumPy, f64
    for _ in range(STEPS):
        gw, gb = ddp.numpy_grad(x, y, w, b, 1.0 / N)
        w, b = w - LR * gw, b - LR * gb
    assert rel(ranks[0]["w"], w) < 1e-3 and rel(ranks[0]["b"], b) < 1e-3


def test_two_gpus_from_two_threads_at_once(in_threads):
    x, y, w0, b0 = ddp.make_data(4096, 32, seed=3)
    halves = [(x[:2048], y[:2048]), (x[2048:], y[2048:])]
    results = in_threads(lambda i: ddp.train(kern.Context("cuda:%d" % i), *halves[i], w0, b0,
                                             3, 0.5, 4096), 2)
    for i in range(2):
        gw_np, gb_np = ddp.numpy_grad(*halves[i], w0, b0, 1.0 / 4096)
        (_, _), (gw, gb), _ = results[i]
        assert rel(gw, gw_np) < 1e-4 and rel(gb, gb_np) < 1e-4, i


def test_copies_between_gpus():
    c0, c1, cpu = kern.Context("cuda:0"), kern.Context("cuda:1"), kern.Context("cpu")
    a = np.arange(3 << 20, dtype=np.float32).reshape(3, 1 << 20) * 0.5  # 12 MB
    b0 = kern.Buffer.from_array(a, context=c0)
    b1 = b0.to(c1)  # cuMemcpyPeerAsync
    assert b1.context is c1
    np.testing.assert_array_equal(b1.read(), a)
    back = kern.Buffer.zeros(a.shape, context=c0)
    back.copy_from(b1)
    np.testing.assert_array_equal(back.read(), a)
    np.testing.assert_array_equal(b1.to(cpu).numpy(), a)
    np.testing.assert_array_equal(kern.Buffer.from_array(a, context=cpu).to(c1).read(), a)


def test_torch_tensors_of_gpu_one_in_place():
    c1 = kern.Context("cuda:1")
    mod = kern.compile(ddp.SRC, context=c1)
    x, y, w0, b0 = ddp.make_data(1000, 16, seed=5)
    dev = torch.device("cuda", 1)
    t = [torch.from_numpy(v).to(dev) for v in (x, w0, b0, y)]
    loss = torch.zeros(1, device=dev)
    before = loss.data_ptr()
    with warnings.catch_warnings():
        warnings.simplefilter("error", kern.CopyWarning)  # used in place, never copied
        mod.loss(x=t[0], w=t[1], b=t[2], y=t[3], loss=loss)
    assert loss.data_ptr() == before
    want = np.sum((np.tanh(x.astype(np.float64) @ w0 + b0[0]) - y) ** 2)
    assert abs(float(loss) - want) < 1e-4 * want
    # a tensor of GPU 0 is copied (said), and the result written back to it
    loss0 = torch.zeros(1, device="cuda:0")
    with pytest.warns(kern.CopyWarning, match=r"parameter 'loss': copied, not used in place"):
        mod.loss(x=t[0], w=t[1], b=t[2], y=t[3], loss=loss0)
    assert abs(float(loss0) - want) < 1e-4 * want
    buf = kern.Buffer.from_array(x, context=c1)
    assert buf.__dlpack_device__() == (2, 1)
    np.testing.assert_array_equal(torch.from_dlpack(buf).cpu().numpy(), x)
    assert torch.from_dlpack(buf).device == dev


def test_device_number_beyond_the_count():
    n = torch.cuda.device_count()
    with pytest.raises(kern.ArgumentError,
                       match=r"there is no CUDA device %d: the driver sees %d \(0 to %d\)"
                             % (n, n, n - 1)):
        kern.Context("cuda:%d" % n)
