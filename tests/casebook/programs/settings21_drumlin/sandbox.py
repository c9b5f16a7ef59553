"""Resource limits for the vendor-format decoder (it parses files from outside the lab)."""
import resource


def limits_for(sc):
    """A preexec_fn for subprocess.Popen applying the profile's [sandbox] limits in the child."""
    cpu = int(sc["cpu_seconds"])
    mem = int(sc["address_space_mb"]) << 20

    def apply():
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
        resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))

    return apply
