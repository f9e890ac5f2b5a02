"""fit.py - a small optimisation loop: fit the weights w of a per-thread loop
(examples/simulate.kern: x <- x + w[t] sin(x) for t = 0..7, 256 items) to states made with
known weights, by gradient descent with kern computing the states and dL/dw through a tape.
Runs on the CPU, or on the GPU with --device cuda (PyTorch CUDA tensors passed in place).

    /usr/bin/python3 python/examples/fit.py [--device cuda]   # the package setup.sh installed
    PYTHONPATH=build/python /usr/bin/python3 python/examples/fit.py \\
        [--iters N] [--out DIR] [--no-plots] [--device cuda]

The loss is the error of the state after every step, L = sum_k mean((out_k - target_k)^2),
out_k the state after k steps (k launches of simulate, all on one tape, sharing w). Fitting
the final state alone is a trap: for small weights it is x0 + sum(w) sin(x0) + O(w^2), so it
fixes little more than sum(w); the Hessian of that loss has the eigenvalues 7, 7e-3, 7e-6,
2e-9, ..., and plain gradient descent (rate 0.3) stalls at 1.746e-4 from iteration 100 on
(a copy in float64 NumPy with exact gradients stalls at the same loss: the problem, not
kern's gradients). The states after every step pin each weight down (eigenvalues 0.16 to
26), and gradient descent with momentum (rate 0.07, momentum 0.85) then recovers w to the
precision of float32. The picture DIR/fit_loss.png (DIR by default ./kern-examples; a file
that a kern example did not write is never replaced) shows both descents."""
import argparse
import os

import numpy as np

import kern
import pngout

HERE = os.path.dirname(os.path.abspath(__file__))
N, STEPS = 256, 8


def descend(mod, ctx, device, x0, w_true, states, iters, lr, momentum):
    """Gradient descent from w = 0 on L = sum over k in states of mean((out_k - target_k)^2);
    returns the loss before each step and max |w - w_true| after it."""
    def arrays(*a):
        if device == "cpu":
            return a
        import torch
        return [torch.from_numpy(x).to(device) for x in a]

    def host(a):
        return np.asarray(a.cpu() if hasattr(a, "cpu") else a)

    x0_d, w_true_d = arrays(x0, w_true)
    targets = {}
    for k in states:                                # the targets, from the known weights
        (out,) = arrays(np.zeros(N, np.float32))
        mod.simulate(x0=x0_d, w=w_true_d, out=out, steps=k)
        targets[k] = host(out)

    w = np.zeros(STEPS, np.float32)
    velocity = np.zeros(STEPS, np.float32)
    losses, errors = [], []
    for it in range(iters):
        (w_d,) = arrays(w)
        outs = {k: arrays(np.zeros(N, np.float32))[0] for k in states}
        with kern.Tape(ctx) as tape:
            for k in states:
                mod.simulate(x0=x0_d, w=w_d, out=outs[k], steps=k)
        seeds, loss = [], 0.0
        for k in states:
            r = host(outs[k]) - targets[k]
            loss += float(np.mean(r.astype(np.float64) ** 2))
            seeds.append((outs[k], arrays((2.0 / N * r).astype(np.float32))[0]))  # dL/d(out_k)
        tape.backward(seeds=seeds)
        velocity = momentum * velocity + tape.grad(w_d)
        w = (w - lr * velocity).astype(np.float32)
        tape.release()
        losses.append(loss)
        errors.append(float(np.abs(w - w_true).max()))
    return np.array(losses), np.array(errors), w


def draw(out, stalled, fitted, fitted_err):
    plt = pngout.pyplot()
    fig, ax = plt.subplots(figsize=(6, 3.4), dpi=90)
    ax.semilogy(stalled, label="final state only, plain descent")
    ax.semilogy(np.maximum(fitted, 1e-30), label="every state, with momentum")
    ax.semilogy(fitted_err, "--", lw=1, label="every state: max |w - w_true|")
    ax.set_xlabel("iteration")
    ax.set_ylabel("loss; |w - w_true|")
    ax.set_title("fit.py: fitting the weights of simulate.kern", fontsize=10)
    ax.grid(True, which="both", lw=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    path = out.save(fig, "fit_loss.png")
    plt.close(fig)
    return path


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--iters", type=int, default=300, help="gradient steps (default 300)")
    p.add_argument("--out", default=pngout.DEFAULT_DIR,
                   help="directory of the picture (default ./%s)" % pngout.DEFAULT_DIR)
    p.add_argument("--no-plots", action="store_true", help="write no picture")
    p.add_argument("--device", default="cpu", help="cpu (default) or cuda")
    a = p.parse_args(argv)
    if a.iters < 2:
        p.error("--iters must be at least 2")
    out = None if a.no_plots else pngout.output_or_exit(a.out, ["fit_loss.png"], "fit.py")

    ctx = kern.Context(a.device)
    mod = kern.compile(os.path.join(HERE, "..", "..", "examples", "simulate.kern"), context=ctx)
    rng = np.random.default_rng(0)
    x0 = rng.uniform(-1, 1, N).astype(np.float32)
    w_true = rng.uniform(-0.3, 0.3, STEPS).astype(np.float32)

    stalled, _, _ = descend(mod, ctx, a.device, x0, w_true, [STEPS], a.iters, 0.3, 0.0)
    losses, errors, w = descend(mod, ctx, a.device, x0, w_true, range(1, STEPS + 1), a.iters,
                                0.07, 0.85)
    for it in range(0, a.iters, 50):
        print("iteration %3d  loss %.3e  |w - w_true| %.3e   (final state only: loss %.3e)" %
              (it, losses[it], errors[it], stalled[it]))
    print("loss %.3e -> %.3e, max |w - w_true| %.3e" % (losses[0], losses[-1], errors[-1]))
    if out is not None:
        print("wrote", draw(out, stalled, losses, errors))
    if a.iters >= 200:   # what gradient descent must have done by then
        assert losses[-1] < 1e-6 * losses[0] and errors[-1] < 1e-3, (losses[-1], errors[-1])
    return losses, errors, w, w_true


if __name__ == "__main__":
    main()
