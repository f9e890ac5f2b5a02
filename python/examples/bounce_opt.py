"""bounce_opt.py - a differentiable simulation optimized by gradient descent: balls thrown in
2-D bounce off the floor and a wall (examples/bounce2d.kern, one launch of `step` per time
step), and the throws (the initial velocities) are changed until every ball's path passes
through its target. Each iteration records the T launches of `step` and the launch of
`miss` (the loss) on a tape; `tape.backward` runs them backwards (`miss.grad`, then T
launches of `step.grad`) and gives dL/dv[0], the gradient with respect to the throws.

    PYTHONPATH=build/python /usr/bin/python3 python/examples/bounce_opt.py \\
        [--iters N] [--lr LR] [--out DIR] [--no-plots] [--device cpu|cuda|vulkan]

Reads the scene from examples/data/bounce2d_*.npy (examples/make_data.py) and writes
DIR/bounce_frames.png (frames of the flight before and after the optimization) and
DIR/bounce_loss.png (the loss per iteration), DIR by default ./kern-examples; it never
replaces a file that a kern example did not write (python/examples/pngout.py)."""
import argparse
import contextlib
import os
import sys

import numpy as np

import kern
import pngout

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLES = os.path.join(HERE, "..", "..", "examples")
DT = 0.02                   # seconds per step, as in bounce2d.kern's header command
WALL = 4.0                  # bounce2d.kern's WALL, for the pictures
PICTURES = ["bounce_frames.png", "bounce_loss.png"]


class Scene:
    """The arrays of bounce2d.kern as kern Buffers on one context: x, v (T + 1, B, 2) with the
    throw in row 0, target (B, 2), loss (1,)."""

    def __init__(self, ctx, data):
        try:
            x, v, self.target = [np.load(os.path.join(data, "bounce2d_%s.npy" % name))
                                 for name in ("x", "v", "target")]
        except (OSError, ValueError) as e:
            sys.exit("bounce_opt.py: cannot read the scene (examples/make_data.py writes it): %s" % e)
        if x.ndim != 3 or x.shape[2] != 2 or v.shape != x.shape or self.target.shape != x.shape[1:]:
            sys.exit("bounce_opt.py: %s: the shapes of bounce2d_x/v/target.npy do not fit "
                     "(T + 1, B, 2), (T + 1, B, 2), (B, 2)" % data)
        self.steps = x.shape[0] - 1
        self.v0 = v[0].copy()       # what gradient descent changes
        self.x = kern.Buffer.from_array(x, context=ctx)
        self.v = kern.Buffer.from_array(v, context=ctx)
        self.targets = kern.Buffer.from_array(self.target, context=ctx)
        self.loss = kern.Buffer.zeros((1,), context=ctx)
        self.seed = kern.Buffer.from_array(np.ones(1, np.float32), context=ctx)

    def throw(self, mod, tape=None):
        """Runs the flight from the throw v0 and the loss, on tape when one is given; returns
        the loss."""
        v = self.v.read()
        v[0] = self.v0
        self.v.write(v)
        self.loss.write(np.zeros(1, np.float32))
        with tape if tape is not None else contextlib.nullcontext():
            for t in range(self.steps):
                mod.step(x=self.x, v=self.v, dt=DT, t=t)
            mod.miss(x=self.x, target=self.targets, loss=self.loss)
        return float(self.loss.read()[0])


def optimize(ctx, mod, scene, iters, lr, verbose):
    """Plain gradient descent on the throws; returns the losses, before each step and after
    the last, and the paths (T + 1, B, 2) of the first and the last throw."""
    losses = []
    for it in range(iters):
        tape = kern.Tape(ctx)
        losses.append(scene.throw(mod, tape))
        if it == 0:
            first_path = scene.x.read()
        tape.backward(seeds=[(scene.loss, scene.seed)])
        grad = tape.grad(scene.v)[0]            # dL/d(throw): row 0 of v's adjoint
        tape.release()
        scene.v0 -= lr * grad
        if verbose and it % 50 == 0:
            print("iteration %4d  loss %.3e" % (it, losses[-1]))
    losses.append(scene.throw(mod))
    return np.array(losses), first_path, scene.x.read()


def draw(out, scene, before, after, losses):
    plt = pngout.pyplot()
    steps = scene.steps
    frames = [0, steps // 4, steps // 2, 3 * steps // 4, steps]
    colors = plt.get_cmap("tab10").colors
    fig, axes = plt.subplots(2, len(frames), figsize=(12, 4.6), dpi=80,
                             sharex=True, sharey=True)
    top = max(before[..., 1].max(), after[..., 1].max(), scene.target[:, 1].max()) + 0.3
    for row, (path, name) in enumerate([(before, "before: the first throws"),
                                        (after, "after %d iterations" % (len(losses) - 1))]):
        for col, t in enumerate(frames):
            ax = axes[row, col]
            ax.axhspan(-0.2, 0.0, color="0.8")
            ax.axvspan(WALL, WALL + 0.3, color="0.8")
            for b in range(path.shape[1]):
                c = colors[b % len(colors)]
                ax.plot(path[: t + 1, b, 0], path[: t + 1, b, 1], color=c, lw=1)
                ax.plot(*path[t, b], "o", color=c, ms=6)
                ax.plot(*scene.target[b], "x", color=c, ms=9, mew=2)
            ax.set_xlim(-0.2, WALL + 0.3)
            ax.set_ylim(-0.2, top)
            ax.set_aspect("equal")
            ax.set_title("t = %.2f s" % (t * DT), fontsize=9)
            ax.tick_params(labelsize=7)
        axes[row, 0].set_ylabel(name, fontsize=9)
    fig.suptitle("bounce2d.kern: balls (o) thrown at their targets (x)", fontsize=11)
    fig.tight_layout()
    written = [out.save(fig, "bounce_frames.png")]
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(5, 3.2), dpi=90)
    ax.semilogy(np.maximum(losses, 1e-30))
    ax.set_xlabel("iteration")
    ax.set_ylabel("loss (sum of squared misses, m^2)")
    ax.set_title("gradient descent on the throws", fontsize=10)
    ax.grid(True, which="both", lw=0.3)
    fig.tight_layout()
    written.append(out.save(fig, "bounce_loss.png"))
    plt.close(fig)
    return written


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--iters", type=int, default=200, help="gradient steps (default 200)")
    p.add_argument("--lr", type=float, default=0.2, help="learning rate (default 0.2)")
    p.add_argument("--out", default=pngout.DEFAULT_DIR,
                   help="directory of the pictures (default ./%s)" % pngout.DEFAULT_DIR)
    p.add_argument("--no-plots", action="store_true", help="write no pictures")
    p.add_argument("--device", default="cpu", help="cpu (default), cuda or vulkan")
    p.add_argument("--data", default=os.path.join(EXAMPLES, "data"),
                   help="directory of bounce2d_*.npy (default examples/data)")
    a = p.parse_args(argv)
    if a.iters < 1:
        p.error("--iters must be at least 1")
    out = None if a.no_plots else pngout.output_or_exit(a.out, PICTURES, "bounce_opt.py")

    ctx = kern.Context(a.device)
    mod = kern.compile(os.path.join(EXAMPLES, "bounce2d.kern"), context=ctx)
    scene = Scene(ctx, a.data)
    losses, before, after = optimize(ctx, mod, scene, a.iters, a.lr, verbose=True)
    print("loss %.3e -> %.3e after %d iterations; throws (m/s):" % (losses[0], losses[-1], a.iters))
    for b, v in enumerate(scene.v0):
        print("  ball %d  v0 = (%6.3f, %6.3f)" % (b, v[0], v[1]))
    if out is not None:
        for path in draw(out, scene, before, after, losses):
            print("wrote", path)
    return losses


if __name__ == "__main__":
    main()
