"""Run logging: one rotating log file per run, levels from the [logging] table."""
import logging.config
import os

FORMAT = "%(asctime)s %(levelname)-7s %(process)d %(threadName)s %(name)s: %(message)s"


def setup(cfg, directory):
    path = os.path.join(directory, "run.log")
    logging.config.dictConfig({
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"plain": {"format": FORMAT}},
        "handlers": {
            "file": {
                "class": "logging.handlers.RotatingFileHandler",
                "filename": path,
                "maxBytes": cfg["file_max_mb"] * 1024 * 1024,
                "backupCount": cfg["file_backups"],
                "formatter": "plain",
            },
        },
        "root": {"level": cfg["level"], "handlers": ["file"]},
        "loggers": {name: {"level": level} for name, level in cfg.get("loggers", {}).items()},
    })
    return path
