"""Synthetic recipe catalogue and users: each recipe has a cuisine, eight ingredient ids, a cook time and a
rating; each user has a favourite cuisine, a taste vector over ingredient groups and a time budget. The
catalogue is sorted by cuisine, so a cuisine's recipes are one contiguous range."""
import numpy as np

CUISINES = 24
INGREDIENTS = 3000
PER_RECIPE = 8
USER_DENSE = 16


class Catalogue:
    def __init__(self, n_recipes, n_users, seed):
        rng = np.random.default_rng(seed)
        self.n = n_recipes
        share = rng.dirichlet(np.full(CUISINES, 2.0))
        counts = np.maximum((share * n_recipes).astype(np.int64), 1)
        counts[-1] += n_recipes - counts.sum()
        self.cuisine_count = counts
        self.cuisine_start = np.concatenate([[0], np.cumsum(counts)[:-1]])
        self.cuisine = np.repeat(np.arange(CUISINES), counts)
        # ingredients: a cuisine-typical pool plus a few from anywhere
        pools = rng.integers(0, INGREDIENTS, (CUISINES, 60))
        local = pools[self.cuisine[:, None], rng.integers(0, 60, (n_recipes, PER_RECIPE - 2))]
        self.ingredients = np.concatenate([local, rng.integers(0, INGREDIENTS, (n_recipes, 2))], 1).astype(np.int64)
        self.cook_min = rng.gamma(2.0, 18.0, n_recipes).astype(np.float32)
        self.rating = np.clip(rng.normal(4.0, 0.5, n_recipes), 1, 5).astype(np.float32)
        self.user_cuisine = rng.integers(0, CUISINES, n_users)
        self.user_dense = rng.normal(0, 1, (n_users, USER_DENSE)).astype(np.float32)
        self.user_budget = rng.gamma(3.0, 15.0, n_users).astype(np.float32)

    def item_features(self, ids):
        dense = np.stack([np.log1p(self.cook_min[ids]) - 3.2, self.rating[ids] - 4.0], 1)
        return self.ingredients[ids], self.cuisine[ids], dense
