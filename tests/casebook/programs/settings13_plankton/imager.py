"""Synthetic flow-cell imager: 224 x 224 8-bit regions of interest of six plankton kinds drawn as bright
shapes (chains of diatom discs, copepod bodies with antennae, round ciliates, rods, spiny radiolarians, marine
snow aggregates) on a dark, noisy background. The imager's trigger often fires more than once on a particle as it
drifts through the cell, so the stream repeats the same ROI bytes one to three times."""
import numpy as np

ROI = 224
KINDS = ("diatom_chain", "copepod", "ciliate", "rod", "radiolarian", "marine_snow")


def _draw(rng, kind, yy, xx):
    img = rng.normal(12, 4, (ROI, ROI))
    cy, cx = rng.uniform(70, 154, 2)
    ang = rng.uniform(0, np.pi)
    ca, sa = np.cos(ang), np.sin(ang)
    u = (xx - cx) * ca + (yy - cy) * sa
    v = -(xx - cx) * sa + (yy - cy) * ca
    if kind == "diatom_chain":
        for k in range(int(rng.integers(3, 7))):
            img += 160 * np.exp(-((u - (k - 2.5) * 18) ** 2 + v ** 2) / 60)
    elif kind == "copepod":
        img += 170 * np.exp(-(u ** 2 / 900 + v ** 2 / 150))
        img += 90 * np.exp(-((np.abs(v) - 0.9 * np.abs(u + 30)) ** 2) / 8) * (u < -30) * (u > -90)
    elif kind == "ciliate":
        r = np.sqrt(u ** 2 + v ** 2)
        img += 140 * np.exp(-(r - 24) ** 2 / 30) + 60 * (r < 22)
    elif kind == "rod":
        img += 180 * np.exp(-(v ** 2 / 12)) * (np.abs(u) < rng.uniform(30, 80))
    elif kind == "radiolarian":
        r = np.sqrt(u ** 2 + v ** 2)
        th = np.arctan2(v, u)
        img += 150 * (r < 28) + 110 * (np.cos(th * int(rng.integers(8, 16))) > 0.95) * (r < 70)
    else:
        for _ in range(int(rng.integers(6, 14))):
            dy, dx = rng.normal(0, 20, 2)
            img += rng.uniform(50, 120) * np.exp(-((u - dx) ** 2 + (v - dy) ** 2) / rng.uniform(20, 120))
    return np.clip(img, 0, 255).astype(np.uint8)


class FlowCell:
    """The ROI stream: a pool of imaged particles (synthesised at start-up), each emitted as a new ROI with a
    fresh orientation/offset, one to three times in a row."""

    def __init__(self, n_particles, seed):
        self.rng = np.random.default_rng(seed)
        yy, xx = np.mgrid[0:ROI, 0:ROI].astype(np.float32)
        self.labels = self.rng.integers(0, len(KINDS), n_particles)
        self.pool = np.stack([_draw(self.rng, KINDS[k], yy, xx) for k in self.labels])

    def rois(self, n):
        rng = self.rng
        out = []
        while len(out) < n:
            i = int(rng.integers(len(self.pool)))
            roi = np.roll(self.pool[i], tuple(rng.integers(-12, 13, 2)), axis=(0, 1))
            if rng.random() < 0.5:
                roi = roi[:, ::-1]
            roi = np.ascontiguousarray(roi)
            roi[0, :4] = rng.integers(0, 256, 4)         # the trigger's frame counter, burnt into the corner
            for _ in range(1 + int(rng.random() < 0.35) + int(rng.random() < 0.1)):
                out.append((roi, int(self.labels[i])))
        return out
