"""Synthetic roof-mounted LiDAR crops: one object cluster per crop, plus ground returns."""
import numpy as np

CLASSES = ("background", "car", "pedestrian", "cyclist", "pole")
FEATURES = 4   # x, y, z, intensity

# half-sizes (length, width, height) in metres, row = class id
_EXTENT = np.array([
    (0.0, 0.0, 0.0),
    (2.2, 0.9, 0.75),
    (0.3, 0.3, 0.9),
    (0.9, 0.3, 0.8),
    (0.12, 0.12, 2.5),
], dtype=np.float32)
SENSOR_HEIGHT = 1.7


def crops(rng, size, n_points):
    labels = rng.integers(0, len(CLASSES), size=size)
    xyz = rng.uniform(-6, 6, size=(size, n_points, 3)).astype(np.float32)
    xyz[..., 2] = rng.normal(-SENSOR_HEIGHT, 0.03, size=(size, n_points))
    ext = _EXTENT[labels][:, None, :]
    obj = rng.uniform(-1, 1, size=(size, n_points, 3)).astype(np.float32) * ext
    obj[..., 2] += ext[..., 2] - SENSOR_HEIGHT
    on_object = (labels[:, None] > 0) & (np.arange(n_points)[None, :] >= n_points // 2)
    xyz = np.where(on_object[..., None], obj, xyz)
    inten = rng.gamma(2.0, 0.15, size=(size, n_points, 1)).astype(np.float32)
    return np.concatenate([xyz, inten], axis=2), labels.astype(np.int64)


def augment(rng, clouds):
    """Random yaw, scale and jitter per crop; 10% of returns lose their intensity."""
    size, n_points, _ = clouds.shape
    theta = rng.uniform(0, 2 * np.pi, size=size)
    c, s = np.cos(theta), np.sin(theta)
    rot = np.zeros((size, 3, 3), dtype=np.float32)
    rot[:, 0, 0], rot[:, 0, 1], rot[:, 1, 0], rot[:, 1, 1], rot[:, 2, 2] = c, -s, s, c, 1.0
    scale = rng.uniform(0.9, 1.1, size=(size, 1, 1)).astype(np.float32)
    out = clouds.copy()
    out[..., :3] = np.matmul(clouds[..., :3], rot.transpose(0, 2, 1)) * scale
    out[..., :3] += rng.normal(0, 0.02, size=(size, n_points, 3)).astype(np.float32)
    out[..., 3] *= rng.random((size, n_points)) >= 0.1
    return out


def batch(rng, size, n_points):
    clouds, labels = crops(rng, size, n_points)
    return augment(rng, clouds), labels
