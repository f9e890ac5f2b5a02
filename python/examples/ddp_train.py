"""ddp_train.py - data-parallel training on several GPUs with kern and torch.distributed.

One process per GPU (torch.multiprocessing). Process RANK owns GPU RANK through
kern.Context("cuda:RANK"), holds the whole model (w, b) and its shard of the batch, runs
the kernel's gradient K.grad on the shard (into PyTorch CUDA tensors, in place), and
torch.distributed with the NCCL backend sums the weight gradient over the processes
(all_reduce); every process then takes the same SGD step. The loss is the mean over the
whole batch, so each shard's K.grad is seeded with 1 / N (not 1 / shard): the sum of the
shards' gradients is the full batch's.

    python3 python/examples/ddp_train.py [--gpus 2] [--steps 30] [--out DIR] [--check]
    python3 python/examples/ddp_train.py --device cpu     (the same on CPU processes, gloo)

--out DIR saves each rank's result (rankR.npz: the first step's all-reduced gradient, the
final weights, the losses); --check compares them with the same training on one GPU (the
full batch's K.grad on cuda:0) and with NumPy, and exits 1 when they differ.
tests/python/test_multigpu.py runs it on the 2-GPU machine (scripts/device-run.sh
multigpu)."""
import argparse
import os
import socket
import sys

import numpy as np

import kern

# y_hat = tanh(x . w + b), L = scale * sum_i (y_hat_i - y_i)^2; x and y are data (nograd)
SRC = """
kernel loss(nograd x: f32[,], w: f32[], b: f32[], nograd y: f32[], loss: f32[]) {
    for i in 0..len(y) {
        var z = b[0];
        for j in 0..len(w) {
            z += x[i, j] * w[j];
        }
        let d = tanh(z) - y[i];
        loss[0] += d * d;
    }
}
"""


def make_data(n, d, seed=0):
    """The batch (x, y) and the starting weights (w0, b0), the same in every process."""
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((n, d)) / np.sqrt(d)).astype(np.float32)
    w_true = rng.standard_normal(d).astype(np.float32)
    y = np.tanh(x @ w_true + 0.3).astype(np.float32)
    w0 = (0.1 * rng.standard_normal(d)).astype(np.float32)
    return x, y, w0, np.zeros(1, np.float32)


def numpy_grad(x, y, w, b, scale):
    """dL/dw, dL/db of the loss in float64 (the reference)."""
    x, y, w, b = (a.astype(np.float64) for a in (x, y, w, b))
    t = np.tanh(x @ w + b[0])
    dz = scale * 2 * (t - y) * (1 - t * t)
    return x.T @ dz, np.array([dz.sum()])


def train(ctx, x, y, w0, b0, steps, lr, n_total, all_reduce=None):
    """SGD for `steps` steps on ctx's GPU with the gradient of K.grad on (x, y), summed over
    the processes by all_reduce(tensor) (None: one GPU). Returns the final (w, b), the
    first step's gradient (gw, gb) and the losses, as NumPy arrays."""
    import torch
    dev = torch.device("cuda", ctx.index) if ctx.device == "cuda" else torch.device("cpu")
    mod = kern.compile(SRC, context=ctx)
    x, y = torch.from_numpy(x).to(dev), torch.from_numpy(y).to(dev)
    w, b = torch.tensor(w0, device=dev), torch.tensor(b0, device=dev)  # copies: trained in place
    seed = torch.full((1,), 1.0 / n_total, device=dev)  # dL/d(loss[0])
    first, losses = None, []
    for _ in range(steps):
        loss = torch.zeros(1, device=dev)
        gw, gb = torch.zeros_like(w), torch.zeros_like(b)
        mod.loss(x=x, w=w, b=b, y=y, loss=loss)
        mod["loss.grad"](x=x, w=w, b=b, y=y, loss=loss, w__grad=gw, b__grad=gb,
                         loss__grad=seed)
        if all_reduce is not None:
            for t in (gw, gb, loss):
                all_reduce(t)
        if first is None:
            first = (gw.cpu().numpy(), gb.cpu().numpy())
        losses.append(float(loss) / n_total)
        w -= lr * gw
        b -= lr * gb
    return (w.cpu().numpy(), b.cpu().numpy()), first, np.array(losses)


def worker(rank, world, port, args):
    import torch
    import torch.distributed as dist
    gpu = args.device == "cuda"
    if gpu:
        torch.cuda.set_device(rank)
    dist.init_process_group("nccl" if gpu else "gloo", init_method="tcp://127.0.0.1:%d" % port,
                            rank=rank, world_size=world)
    x, y, w0, b0 = make_data(args.n, args.d)
    lo, hi = rank * args.n // world, (rank + 1) * args.n // world  # this rank's shard
    ctx = kern.Context("cuda:%d" % rank if gpu else "cpu", threads=1 if not gpu else 0)
    (w, b), (gw, gb), losses = train(ctx, x[lo:hi], y[lo:hi], w0, b0, args.steps, args.lr,
                                     args.n, lambda t: dist.all_reduce(t, dist.ReduceOp.SUM))
    print("rank %d on %s (kern: %s): rows %d..%d, loss %.4e -> %.4e" %
          (rank, repr(ctx), ctx.device_name, lo, hi, losses[0], losses[-1]), flush=True)
    if args.out:
        np.savez(os.path.join(args.out, "rank%d.npz" % rank), w=w, b=b, gw=gw, gb=gb,
                 losses=losses, index=ctx.index, lo=lo, hi=hi)
    dist.destroy_process_group()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def check(args):
    """The ranks' results against one GPU's training on the full batch and NumPy."""
    x, y, w0, b0 = make_data(args.n, args.d)
    ctx = kern.Context("cuda:0" if args.device == "cuda" else "cpu")
    (w1, b1), (gw1, gb1), _ = train(ctx, x, y, w0, b0, args.steps, args.lr, args.n)
    gw_np, gb_np = numpy_grad(x, y, w0, b0, 1.0 / args.n)
    ok = True
    for r in range(args.gpus):
        f = np.load(os.path.join(args.out, "rank%d.npz" % r))
        errs = {"grad vs one process": np.abs(f["gw"] - gw1).max() / np.abs(gw1).max(),
                "grad vs NumPy": np.abs(f["gw"] - gw_np).max() / np.abs(gw_np).max(),
                "b.grad vs NumPy": abs(f["gb"][0] - gb_np[0]) / max(abs(gb_np[0]), 1e-6),
                "w after %d steps vs one process" % args.steps:
                    np.abs(f["w"] - w1).max() / np.abs(w1).max()}
        print("rank %d: " % r + ", ".join("%s %.2e" % kv for kv in errs.items()))
        ok = ok and all(e < 1e-4 for e in errs.values())
    print("check: %s" % ("the ranks agree with one process (the full batch) and NumPy" if ok else "MISMATCH"))
    return ok


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gpus", type=int, default=2)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--lr", type=float, default=0.5)
    ap.add_argument("--n", type=int, default=8192, help="rows of the batch")
    ap.add_argument("--d", type=int, default=64, help="features")
    ap.add_argument("--out", help="a directory for rankR.npz")
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda",
                    help="cpu: processes on the CPU, all-reduced by gloo (no GPU needed)")
    args = ap.parse_args()
    import torch
    import torch.multiprocessing as mp
    if args.device == "cuda" and torch.cuda.device_count() < args.gpus:
        sys.exit("ddp_train.py: %d GPUs asked for, torch sees %d" %
                 (args.gpus, torch.cuda.device_count()))
    if args.check and not args.out:
        args.out = os.path.abspath("ddp-out")
    if args.out:
        os.makedirs(args.out, exist_ok=True)
    mp.spawn(worker, args=(args.gpus, free_port(), args), nprocs=args.gpus, join=True)
    if args.check and not check(args):
        sys.exit(1)


if __name__ == "__main__":
    main()
