"""The `minikafka` command: help works everywhere, bad arguments are one clear error with exit status 2."""

import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow  # runs the CLI as processes

CLI = [sys.executable, "-m", "minikafka_cli.main"]


def test_help_lists_the_commands():
    out = subprocess.run(CLI + ["--help"], capture_output=True, text=True, check=True).stdout
    assert "run" in out


def test_bad_arguments_exit_2_without_a_traceback():
    result = subprocess.run(CLI + ["no-such-command"], capture_output=True, text=True)
    assert result.returncode == 2
    assert "invalid choice" in result.stderr and "Traceback" not in result.stderr


def test_every_command_has_help():
    for command in ("broker", "cluster", "topics", "produce", "consume", "run"):
        result = subprocess.run(CLI + [command, "--help"], capture_output=True, text=True)
        assert result.returncode == 0 and "usage: minikafka " + command in result.stdout, command


def test_version_prints_the_installed_version_and_exits_0():
    from importlib.metadata import version

    result = subprocess.run(CLI + ["--version"], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"minikafka {version('minikafka')} ") and "Kafka 3.8" in result.stdout
