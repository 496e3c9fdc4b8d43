"""``python -m train fit --config configs/train/<run>.yaml``: the LightningCLI entry.

Model and data are given by class path in the config (``model.class_path``,
``data.class_path``), so any LightningModule / DataModule of this package trains through
the same entry. W&B logging (WandbLogger) is the default: offline unless ``WANDB_MODE``
is set to ``online``. Checkpoints are sealed with a checksum
(:class:`train.checkpoint_io.SealedCheckpointIO`) and checked when a run resumes.
"""

from __future__ import annotations

import os

from lightning.pytorch import LightningDataModule, LightningModule
from lightning.pytorch.cli import LightningCLI

from train.checkpoint_io import SealedCheckpointIO


class GeoragCLI(LightningCLI):
    """LightningCLI with a W&B logger by default (offline unless WANDB_MODE=online)."""

    def add_arguments_to_parser(self, parser) -> None:
        online = os.environ.get("WANDB_MODE", "offline") == "online"
        parser.set_defaults(
            {
                "trainer.logger": {
                    "class_path": "lightning.pytorch.loggers.WandbLogger",
                    "init_args": {"project": "georag", "save_dir": "runs", "offline": not online},
                }
            }
        )

    def _instantiate_trainer(self, config: dict, callbacks: list):
        plugins = config.get("plugins") or []
        plugins = plugins if isinstance(plugins, list) else [plugins]
        config["plugins"] = [*plugins, SealedCheckpointIO()]
        return super()._instantiate_trainer(config, callbacks)


def main(args: list[str] | None = None) -> GeoragCLI:
    """Run the CLI (``args`` as on the command line; ``None`` reads ``sys.argv``)."""
    return GeoragCLI(
        LightningModule,
        LightningDataModule,
        subclass_mode_model=True,
        subclass_mode_data=True,
        save_config_kwargs={"overwrite": True},
        args=args,
    )


if __name__ == "__main__":
    main()
