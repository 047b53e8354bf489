"""nn.py: what the models of the zoo share: parameters declared on first
use (Params, LayerParams), progress lines, the Built result, the small
layers (dense, normalize, activations, mse), Adam and train_step (the
training-step layout every model uses: forward loss, reverse-mode
gradients, Adam, argument order params / opt_state.mu / opt_state.nu /
batch / step and the donation of every parameter, moment and the step).

Parameters are declared lazily by the forward pass (Params), so their
order is the order of first use, which is the documented order.
"""

import math
import sys
import time

from shlo import emit, prod

# ---------------------------------------------------------------- helpers


def path(*keys):
    return ''.join("['%s']" % k for k in keys)


class Params:
    """Parameter arguments, created on first use; order = first use.

    P(shape, *keys) is the parameter params[keys...] as the computation
    uses it: stored in `dtype` (the graph's by default), converted to
    `compute` at each use when that differs, as Flax modules with
    param_dtype=f32, dtype=bf16 do (`jnp.asarray(kernel, self.dtype)`).
    P.arg(shape, *keys) is the argument itself."""

    def __init__(self, g, requires_grad=True, dtype=None, compute=None):
        self.g = g
        self.requires_grad = requires_grad
        self.dtype = dtype or g.dtype
        self.compute = compute or self.dtype
        self.order = []          # (path, Value)
        self.by_path = {}

    def arg(self, shape, *keys):
        p = path(*keys)
        v = self.by_path.get(p)
        if v is None:
            v = self.g.arg('params' + p, shape, self.dtype,
                           requires_grad=self.requires_grad)
            self.by_path[p] = v
            self.order.append((p, v))
        assert v.shape == tuple(shape), (p, v.shape, shape)
        return v

    def __call__(self, shape, *keys):
        return self.g.convert(self.arg(shape, *keys), self.compute)

    def like(self, other):
        """The parameters of other (a Params of another graph) declared here
        in the same order, names and shapes; returns them."""
        out = []
        for p, v in other.order:
            a = self.g.arg('params' + p, v.shape, self.dtype,
                           requires_grad=self.requires_grad)
            self.by_path[p] = a
            self.order.append((p, a))
            out.append(a)
        return out


class LayerParams:
    """The parameters of one layer inside a scan body: arguments of the
    body graph, found by their path below the layer (the first key, e.g.
    'block_0', dropped), in order of first use, converted to `compute` at
    each use like Params.  The scan stacks each as params['blocks'][...]
    with a leading layer dim, as Flax's nn.scan (variable_axes={'params':
    0}) over a module named 'blocks' does."""

    def __init__(self, g, dtype=None, compute=None, drop=True):
        self.g = g
        self.dtype = dtype or g.dtype
        self.compute = compute or self.dtype
        self.drop = drop         # the first key (the block's name) dropped
        self.order = []          # (keys below the layer, Value)
        self.by_path = {}

    def arg(self, shape, *keys):
        if self.drop:
            keys = keys[1:]
        p = path(*keys)
        v = self.by_path.get(p)
        if v is None:
            v = self.g.arg('layer' + p, shape, self.dtype, requires_grad=True)
            self.by_path[p] = v
            self.order.append((keys, v))
        assert v.shape == tuple(shape), (p, v.shape, shape)
        return v

    def __call__(self, shape, *keys):
        return self.g.convert(self.arg(shape, *keys), self.compute)


class Progress:
    """Progress lines on stderr, only once generation has taken >1 s."""

    def __init__(self, label, quiet=False):
        self.label = label
        self.quiet = quiet
        self.t0 = time.time()
        self.last = 0.0

    def __call__(self, msg, force=False):
        if self.quiet:
            return
        now = time.time()
        if now - self.t0 > 1.0 and (force or now - self.last > 0.5):
            sys.stderr.write('modelgen: %s: %s\n' % (self.label, msg))
            sys.stderr.flush()
            self.last = now


class Built:
    def __init__(self, graph, args, results, module, params):
        self.graph = graph
        self.args = args          # arg Values in signature order
        self.results = results    # [(Value, result_info)]
        self.module = module
        self.params = params      # [(path, Value)]

    def text(self):
        return emit(self.graph, self.args, self.results, self.module)


def bcast_last(g, v, shape):
    """Broadcast a vector over the last dim of shape."""
    return g.broadcast_in_dim(v, shape, (len(shape) - 1,))


def dense(g, P, x, n_out, *keys, bias=True):
    """x [..., n_in] @ w [n_in, n_out] (+ b)."""
    w = P((x.shape[-1], n_out), *keys, 'w')
    y = g.dot_general(x, w, ((x.rank - 1,), (0,)))
    if bias:
        y = g.add(y, bcast_last(g, P((n_out,), *keys, 'b'), y.shape))
    return y


def normalize(g, x, dims, scale=None, bias=None, eps=1e-5):
    """(x - mean) * rsqrt(var + eps) over dims, then * scale + bias
    (scale/bias over the last dim)."""
    n = float(prod(x.shape[d] for d in dims))
    kept = [i for i in range(x.rank) if i not in dims]
    mean = g.div(g.reduce_sum(x, dims), n)
    xc = g.sub(x, g.broadcast_in_dim(mean, x.shape, kept))
    var = g.div(g.reduce_sum(g.mul(xc, xc), dims), n)
    inv = g.rsqrt(g.add(var, eps))
    y = g.mul(xc, g.broadcast_in_dim(inv, x.shape, kept))
    if scale is not None:
        y = g.mul(y, bcast_last(g, scale, x.shape))
    if bias is not None:
        y = g.add(y, bcast_last(g, bias, x.shape))
    return y


def norm_params(g, P, x, dims, *keys):
    c = x.shape[-1]
    return normalize(g, x, dims, P((c,), *keys, 'scale'),
                     P((c,), *keys, 'bias'))


GELU_K = math.sqrt(2.0 / math.pi)


def gelu_tanh(g, x, torch=False):
    """0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).

    Differentiated op by op (as JAX does: the backward reads tanh's
    output, so it is saved), or with torch=True as PyTorch's
    GeluBackward (approximate='tanh', aten gelu_backward) and Megatron's
    fused bias_gelu_back do: the backward reads only x and recomputes
    tanh, so x is all the forward leaves for it."""
    def fwd(g, x):
        x3 = g.mul(g.mul(x, x), x)
        inner = g.mul(g.add(x, g.mul(x3, 0.044715)), GELU_K)
        half = g.mul(x, 0.5)
        t = g.tanh(inner)
        return t, g.mul(half, g.add(t, 1.0))
    t, y = fwd(g, x)
    if not torch:
        return y

    def vjp(g2, ct, need):
        # d/dx = 0.5 (1 + t) + 0.5 x (1 - t^2) k (1 + 3 * 0.044715 x^2)
        t2, _ = fwd(g2, x)
        left = g2.mul(g2.add(t2, 1.0), 0.5)
        dinner = g2.mul(g2.add(g2.mul(g2.mul(x, x), 3 * 0.044715), 1.0),
                        GELU_K)
        right = g2.mul(g2.mul(g2.mul(x, 0.5), g2.sub(1.0, g2.mul(t2, t2))),
                       dinner)
        return [g2.mul(ct, g2.add(left, right))]
    return g.custom_vjp(y, (x,), vjp)


def silu(g, x, torch=False):
    """x sigmoid(x); with torch=True differentiated as PyTorch's
    SiluBackward (aten silu_backward): the backward reads only x and
    recomputes the sigmoid, where JAX's product rule saves it."""
    y = g.mul(x, g.logistic(x))
    if not torch:
        return y

    def vjp(g2, ct, need):
        # d/dx = s (1 + x (1 - s))
        s = g2.logistic(x)
        return [g2.mul(ct, g2.mul(s, g2.add(g2.mul(x, g2.sub(1.0, s)),
                                            1.0)))]
    return g.custom_vjp(y, (x,), vjp)


def relu(g, x):
    return g.maximum(x, 0.0)


def mse(g, pred, target):
    d = g.sub(pred, target)
    return g.div(g.reduce_sum(g.mul(d, d), range(d.rank)),
                 float(prod(d.shape)))


ADAM = {'lr': 3e-4, 'b1': 0.9, 'b2': 0.999, 'eps': 1e-8}


def adam(g, params, grads, mus, nus, step, hp=ADAM):
    """optax.adam: returns (new params, new mu, new nu, new step)."""
    step1 = g.add(step, g.const(1, 'i32'))
    t = g.convert(step1, g.dtype)
    bc1 = g.sub(1.0, g.power(g.const(hp['b1']), t))
    bc2 = g.sub(1.0, g.power(g.const(hp['b2']), t))
    new_p, new_m, new_n = [], [], []
    for p, gr, m, v in zip(params, grads, mus, nus):
        m2 = g.add(g.mul(m, hp['b1']), g.mul(gr, 1.0 - hp['b1']))
        v2 = g.add(g.mul(v, hp['b2']), g.mul(g.mul(gr, gr), 1.0 - hp['b2']))
        mhat = g.div(m2, g.broadcast_in_dim(bc1, p.shape, ()))
        vhat = g.div(v2, g.broadcast_in_dim(bc2, p.shape, ()))
        upd = g.div(mhat, g.add(g.sqrt(vhat), hp['eps']))
        new_p.append(g.sub(p, g.mul(upd, hp['lr'])))
        new_m.append(m2)
        new_n.append(v2)
    return new_p, new_m, new_n, step1


def train_step(g, P, loss, batch_args, progress, module='jit_train_step',
               grads=None):
    """Gradients (unless given, one per parameter of P) + Adam; assembles
    arguments and results as documented."""
    names = [p for p, _ in P.order]
    params = [v for _, v in P.order]
    if grads is None:
        progress('backward pass', force=True)
        grads = g.grad(loss, params)
    mus = [g.arg('opt_state.mu' + p, v.shape, v.dtype) for p, v in P.order]
    nus = [g.arg('opt_state.nu' + p, v.shape, v.dtype) for p, v in P.order]
    step = g.arg('step', (), 'i32')
    progress('optimizer', force=True)
    new_p, new_m, new_n, new_step = adam(g, params, grads, mus, nus, step)
    n = len(params)
    results = [(loss, '[0]')]
    results += [(v, 'grads' + p) for p, v in zip(names, grads)]
    results += [(v, 'params' + p) for p, v in zip(names, new_p)]
    results += [(v, 'opt_state.mu' + p) for p, v in zip(names, new_m)]
    results += [(v, 'opt_state.nu' + p) for p, v in zip(names, new_n)]
    results.append((new_step, 'step'))
    for i in range(n):
        params[i].attrs['alias'] = 1 + n + i
        mus[i].attrs['alias'] = 1 + 2 * n + i
        nus[i].attrs['alias'] = 1 + 3 * n + i
    step.attrs['alias'] = 1 + 4 * n
    args = params + mus + nus + list(batch_args) + [step]
    return Built(g, args, results, module, list(P.order))
