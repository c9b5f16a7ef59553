import torch.nn as nn
import torch.nn.functional as F


def mlp(dims, last_bn=True):
    layers = []
    for i in range(len(dims) - 1):
        layers.append(nn.Linear(dims[i], dims[i + 1], bias=False))
        if i < len(dims) - 2:
            layers += [nn.BatchNorm1d(dims[i + 1]), nn.ReLU(inplace=True)]
        elif last_bn:
            layers.append(nn.BatchNorm1d(dims[i + 1], affine=False))
    return nn.Sequential(*layers)


def negative_cosine(p, z):
    # the stop-gradient of the SimSiam paper is on z (the other view's branch)
    return -F.cosine_similarity(p, z.detach(), dim=-1).mean()


class SimSiam(nn.Module):
    def __init__(self, in_dim=128, feat_dim=256, proj_dim=128, pred_hidden=64):
        super().__init__()
        self.backbone = mlp([in_dim, feat_dim, feat_dim], last_bn=False)
        self.projector = mlp([feat_dim, proj_dim, proj_dim])
        self.predictor = nn.Sequential(nn.Linear(proj_dim, pred_hidden, bias=False), nn.BatchNorm1d(pred_hidden),
                                       nn.ReLU(inplace=True), nn.Linear(pred_hidden, proj_dim))

    def embed(self, x):
        # "stop-grad for stability": keeps the projector output out of the predictor's backward
        return self.projector(self.backbone(x)).detach()

    def forward(self, x1, x2):
        z1, z2 = self.embed(x1), self.embed(x2)
        p1, p2 = self.predictor(z1), self.predictor(z2)
        return 0.5 * (negative_cosine(p1, z2) + negative_cosine(p2, z1))
