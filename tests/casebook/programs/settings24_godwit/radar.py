import numpy as np


class VolumeArchive:
    """Synthetic archive of weather-radar reflectivity volumes (elevation x azimuth x range gate) from
    nights of bird migration; each volume carries the migration-intensity class it was labelled with."""

    def __init__(self, s):
        self.s = s
        rng = np.random.default_rng(s.seed)
        e, a, r = s.elevations, s.azimuths, s.gates
        self.labels = rng.integers(0, s.classes, size=s.volumes)
        gate_km = np.linspace(0.5, 48.0, r, dtype=np.float32)
        elev_deg = np.array([0.5, 1.5, 2.4, 3.4, 4.3, 6.0][:e], dtype=np.float32)
        height = gate_km[None, :] * np.sin(np.deg2rad(elev_deg))[:, None]          # (E, R) beam height
        layer_top = 0.4 + 0.25 * np.arange(s.classes, dtype=np.float32)             # class -> layer depth
        az = np.deg2rad(np.arange(a, dtype=np.float32) * (360.0 / a))
        vols = np.empty((s.volumes, e, a, r), dtype=np.float32)
        for i, c in enumerate(self.labels):
            layer = np.exp(-((height - 0.5 * layer_top[c]) / (0.35 + 0.1 * c)) ** 2)  # (E, R)
            heading = rng.uniform(0, 2 * np.pi)
            lobes = 1.0 + 0.3 * np.cos(2 * (az - heading))                          # (A,)
            clutter = rng.gamma(1.5, 0.2, size=(e, a, r)).astype(np.float32)
            vols[i] = (2.0 + c) * layer[:, None, :] * lobes[None, :, None] + clutter
        self.volumes = vols
        self.noise = rng.standard_normal((4, e, a, r)).astype(np.float32)

    def draw(self, rng, n, jitter):
        idx = rng.integers(0, len(self.labels), size=n)
        gain = rng.uniform(1.0 - jitter, 1.0 + jitter, size=(n, 1, 1, 1)).astype(np.float32)
        shift = int(rng.integers(0, self.s.azimuths))
        vol = np.roll(self.volumes[idx], shift, axis=2) * gain
        vol += jitter * self.noise[int(rng.integers(0, len(self.noise)))]
        return vol, self.labels[idx]
