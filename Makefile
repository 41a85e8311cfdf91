# minikafka: `make run` (the main job) and `make test` (the whole suite) do all set-up themselves.
SHELL := /bin/bash
VENV  := .venv
PY    := $(VENV)/bin/python
STAMP := $(VENV)/.installed

# Python may cache bytecode (__pycache__) in every recipe, whatever the shell says: a `make test`
# starts some 500 broker processes and many CLI and client ones, and with PYTHONDONTWRITEBYTECODE
# set (this machine's shells set it) each compiled ~280 modules from source, about 0.4 s of CPU
# per broker start (0.83-1.15 s to ready; 0.42-0.65 s with the bytecode cached).
export PYTHONDONTWRITEBYTECODE :=
APT_PACKAGES := zookeeper kcat default-jre-headless iptables debootstrap chromium

.PHONY: setup apt venv test test-fast lint run wheel bench chaos fuzz regen clean images compose-up compose-down chaos-docker

setup: apt venv

# Installs the Debian packages only when one is missing (idempotent, no network when all are present).
apt:
	@missing=""; for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "apt: installing$$missing"; \
	  SUDO=""; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing; \
	fi

venv: $(STAMP)

# native/ (the compiled record validator, Rust + PyO3, built by maturin through pip) needs cargo:
# rustup's toolchain lives in ~/.cargo/bin.
$(STAMP): pyproject.toml native/pyproject.toml native/Cargo.toml $(wildcard native/src/*.rs)
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev,spark,run,bench]'
	PATH="$$HOME/.cargo/bin:$$PATH" $(PY) -m pip install -q ./native
	touch $(STAMP)

# Two pytest runs at once, each on pytest-xdist workers: the `heavy` tests (chaos, benches, Docker,
# the main job) on HEAVY_WORKERS (the Docker modules one after another on one worker, the rest
# spread test by test), and the others (cluster tests that mostly wait on sockets and timers, and
# the unit tests) on TEST_WORKERS, a test module per worker at a time. The heavy run's output
# follows the other's; each ends with its modules' times, slowest first (tests/conftest.py).
# The Docker images are built in the background from the start (`minikafka compose build`: on a
# fresh machine some 5 minutes, mostly waiting on Debian's archive); the Docker tests are handed
# out when it is done (tests/conftest.py) and wait on its lock. Where it fails or no Docker engine
# answers, its output is shown and the Docker tests build (or skip) and say why themselves.
# The wall time goes to bench/results/make_test.txt (issue 48's goal table reads it).
TEST_WORKERS ?= 3
HEAVY_WORKERS ?= 2
test: setup
	@log=$$(mktemp); images_log=$$(mktemp); started=$$(date +%s); \
	$(VENV)/bin/minikafka compose build > $$images_log 2>&1 & images=$$!; \
	$(PY) -m pytest -q --durations=15 -n $(HEAVY_WORKERS) --dist loadgroup -m heavy > $$log 2>&1 & heavy=$$!; \
	$(PY) -m pytest -q --durations=15 -n $(TEST_WORKERS) --dist loadfile -m "not heavy"; rest=$$?; \
	wait $$heavy; status=$$?; \
	echo "==================== heavy tests (chaos, benches, Docker, main job) ===================="; \
	if wait $$images; then echo "images: built in the background:"; sed 's/^/  /' $$images_log; \
	else echo "images: the background build failed:"; tail -20 $$images_log; fi; rm -f $$images_log; \
	cat $$log; rm -f $$log; \
	echo "$$(( $$(date +%s) - started )) seconds, exit $$(( rest != 0 || status != 0 )), $$(date -u +%FT%TZ)" > bench/results/make_test.txt; \
	exit $$(( rest != 0 || status != 0 ))

# The pure tests only (no ZooKeeper, broker, client or Spark processes), on two workers: well under a minute.
# Its wall time goes to bench/results/make_test_fast.txt (issue 48's goal table reads it).
test-fast: setup
	@started=$$(date +%s); $(PY) -m pytest -q -n 2 -m "not slow"; status=$$?; \
	echo "$$(( $$(date +%s) - started )) seconds, exit $$status, $$(date -u +%FT%TZ)" > bench/results/make_test_fast.txt; \
	exit $$status

# Lint, format and type checks (configured in pyproject.toml); .ci/run runs them before the tests.
lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

run: setup
	$(VENV)/bin/minikafka run

# The wheels an application installs to use minikafka and its pytest plugin (docs/testing.md):
# dist/minikafka-*.whl and the optional compiled record walk, dist/minikafka_native-*.whl.
wheel: setup
	PATH="$$HOME/.cargo/bin:$$PATH" $(PY) -m pip wheel -q --no-deps -w dist . ./native

# Chaos scenarios against a local 3-broker cluster (part of `make test` too); prints a table.
chaos: setup
	$(PY) -m chaos

# Requests generated from the message specs against a real broker; findings are saved to the
# corpus that tests/cluster/test_spec_fuzz.py replays (FUZZ_SECONDS, FUZZ_SEED to vary the run).
fuzz: setup
	$(PY) -m fuzz.runner --seconds $${FUZZ_SECONDS:-300} $${FUZZ_SEED:+--seed $$FUZZ_SEED} --save fuzz/corpus

bench: setup
	$(PY) -m bench.cluster_bench
	$(PY) -m bench.protocol_bench
	$(PY) -m bench.storage_bench
	$(PY) -m bench.replication_bench
	$(PY) -m bench.group_bench
	$(PY) -m bench.consumer_group_bench
	$(PY) -m bench.share_group_bench
	$(PY) -m bench.telemetry_bench
	$(PY) -m bench.cleaner_bench
	$(PY) -m bench.admin_bench
	$(PY) -m bench.txn_bench
	$(PY) -m bench.security_bench
	$(PY) -m bench.connector_bench
	$(PY) -m bench.request_bench
	$(PY) -m bench.scale_bench
	$(PY) -m bench.quota_bench
	$(PY) -m bench.compose_bench
	$(PY) -m bench.testing_bench
	$(PY) -m bench.goals_bench

# The docker-compose cluster (docker-compose.yml). `images` builds the base image from Debian's
# archive with debootstrap (docker/build-base.sh, once per machine), the wheels and both images;
# compose-up also starts ZooKeeper and brokers 1-3 and waits until they are healthy.
images: setup
	$(VENV)/bin/minikafka compose build

compose-up: setup
	$(VENV)/bin/minikafka compose up

compose-down: setup
	$(VENV)/bin/minikafka compose down

# The chaos scenarios against the docker-compose cluster (Docker's nemeses; also in `make test`).
chaos-docker: setup
	$(PY) -m chaos.docker_runner

# Regenerates protocol/schemas from ../shared/kafka-message-specs (checked in; a test keeps it a no-op).
regen: setup
	$(PY) -m tools.gen_schemas

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
