"""Random integrands and their derivatives, written in prefix notation.

Pairs (f, f') in the style of 'Deep Learning for Symbolic Mathematics'
(Lample & Charton): random expression trees over x with small integer
constants, differentiated and expanded with SymPy, then serialized as
prefix token sequences.
"""
import random

import sympy as sp

X = sp.Symbol("x")
UNARY = {"sin": sp.sin, "cos": sp.cos, "exp": sp.exp, "log": sp.log, "sqrt": sp.sqrt, "tan": sp.tan}
BINARY = ("add", "sub", "mul", "div", "pow")
SPECIALS = ["<pad>", "<bos>", "<sep>", "<eos>", "<unk>"]
FUNCS = {sp.sin: "sin", sp.cos: "cos", sp.exp: "exp", sp.log: "log", sp.tan: "tan"}
VOCAB = SPECIALS + ["add", "mul", "pow", "neg", "inv", "rat", "x", "pi", "E"] + list(UNARY) + \
    [f"INT{d}" for d in range(10)] + ["INT+", "INT-"]
INDEX = {t: i for i, t in enumerate(VOCAB)}
PAD, BOS, SEP, EOS, UNK = range(5)


class Generator:
    def __init__(self, seed, max_depth=3):
        self.rng = random.Random(seed)
        self.max_depth = max_depth

    def leaf(self):
        r = self.rng.random()
        if r < 0.6:
            return X
        return sp.Integer(self.rng.choice([1, 2, 3, 4, 5, -1, -2, 7]))

    def tree(self, depth):
        if depth == 0 or self.rng.random() < 0.15:
            return self.leaf()
        if self.rng.random() < 0.35:
            return UNARY[self.rng.choice(list(UNARY))](self.tree(depth - 1))
        op = self.rng.choice(BINARY)
        a, b = self.tree(depth - 1), self.tree(depth - 1)
        if op == "add":
            return a + b
        if op == "sub":
            return a - b
        if op == "mul":
            return a * b
        if op == "div":
            return a / b if b != 0 else a
        return a ** self.rng.choice([2, 3, -1, sp.Rational(1, 2)])

    def pair(self):
        while True:
            f = self.tree(self.max_depth)
            if f.has(X) and not f.has(sp.zoo, sp.nan, sp.oo):
                break
        df = sp.expand(sp.diff(f, X))
        return f, df


def _int_tokens(n):
    sign = "INT+" if n >= 0 else "INT-"
    return [sign] + [f"INT{d}" for d in str(abs(n))]


def prefix(e, out):
    """Serialize a SymPy expression in prefix notation (n-ary ops binarized)."""
    if e.is_Integer:
        out.extend(_int_tokens(int(e)))
    elif e.is_Rational:
        out.append("rat")
        out.extend(_int_tokens(int(e.p)))
        out.extend(_int_tokens(int(e.q)))
    elif e is X:
        out.append("x")
    elif e is sp.pi:
        out.append("pi")
    elif e is sp.E:
        out.append("E")
    elif e.is_Add or e.is_Mul:
        op = "add" if e.is_Add else "mul"
        args = e.args
        for _ in range(len(args) - 1):
            out.append(op)
        for a in args:
            prefix(a, out)
    elif e.is_Pow:
        out.append("pow")
        prefix(e.base, out)
        prefix(e.exp, out)
    elif e.func in FUNCS:
        out.append(FUNCS[e.func])
        prefix(e.args[0], out)
    else:
        out.append("<unk>")
    return out


def encode(f, df, max_len):
    toks = [BOS] + [INDEX[t] for t in prefix(f, [])] + [SEP] + [INDEX[t] for t in prefix(df, [])] + [EOS]
    return toks[:max_len]
