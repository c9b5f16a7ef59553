"""train.py without the determinism block: the fp32 matmuls run as TF32 on the tensor cores, as configured.
Seeds are still set; the precision line is printed the same way."""
from train import main

if __name__ == "__main__":
    main(deterministic=False)
