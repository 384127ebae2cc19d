"""`sparkctl config`: the effective configuration and where it came from."""

from __future__ import annotations

from sparkctl.cli.exitcodes import EXIT_OK


def register(sub) -> None:
    c = sub.add_parser("config", help="print the effective configuration and where it came from")
    c.set_defaults(handler=cmd_config)


def cmd_config(args, cfg) -> int:
    import tomli_w

    from sparkctl.config import to_toml_dict
    from sparkctl.core.redact import redact_config_dict

    # Shown, never saved: credentials in [tracking] uri, [engine] host, [engines.*] url
    # (user:token@, ?api_key=) print as ***.
    print(f"# source: {cfg.source}")
    print(tomli_w.dumps(redact_config_dict(to_toml_dict(cfg))), end="")
    return EXIT_OK
