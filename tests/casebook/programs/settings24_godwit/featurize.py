import numpy as np

PATHS = {"none": False, "greedy": "greedy", "optimal": "optimal"}


class BeamGeometry:
    """Fixed projection operators of the radar site: range-gate -> height-bin kernel, azimuth ->
    sector weights, elevation -> beam-mode mixing. Built once at start-up."""

    def __init__(self, archive_s, feat_s):
        e, a, r = archive_s.elevations, archive_s.azimuths, archive_s.gates
        g, s, k = feat_s.height_bins, feat_s.sectors, feat_s.beam_modes
        centers = np.linspace(0, r - 1, g)
        gates = np.arange(r)[:, None]
        kern = np.exp(-0.5 * ((gates - centers[None, :]) / (r / g)) ** 2)
        self.gate_kernel = (kern / kern.sum(0, keepdims=True)).astype(np.float32)        # (R, G)
        az = np.arange(a)[:, None] * (2 * np.pi / a)
        mid = (np.arange(s)[None, :] + 0.5) * (2 * np.pi / s)
        sect = np.maximum(np.cos(az - mid), 0.0) ** 4
        self.sector_w = (sect / sect.sum(0, keepdims=True)).astype(np.float32)           # (A, S)
        mix = np.linalg.qr(np.random.default_rng(5).standard_normal((max(e, k), max(e, k))))[0]
        self.beam_w = mix[:e, :k].astype(np.float32)                                      # (E, K)


class Featurizer:
    def __init__(self, geometry, feat_s):
        self.geo = geometry
        self.lags = feat_s.texture_lags
        self.path = PATHS[feat_s.contraction_path]
        self.dtype = np.dtype(feat_s.dtype)

    def __call__(self, vol):
        geo, opt = self.geo, self.path
        vol = vol.astype(self.dtype, copy=False)
        prof = np.einsum("bear,rg->beag", vol, geo.gate_kernel, optimize=opt)          # height profiles
        sect = np.einsum("beag,as->besg", prof, geo.sector_w, optimize=opt)            # sector means
        modes = np.einsum("besg,ek->bskg", sect, geo.beam_w, optimize=opt)             # beam modes
        tex = np.einsum("beag,beah->begh", prof, prof[..., : self.lags], optimize=opt)  # texture
        tex /= prof.shape[2]
        b, s = modes.shape[:2]
        per_sector = np.log1p(np.abs(modes)).reshape(b, s, -1)
        per_volume = np.log1p(np.abs(tex)).mean(1).reshape(b, 1, -1)
        return np.concatenate([per_sector, np.broadcast_to(per_volume, (b, s, per_volume.shape[2]))], axis=2)
