# Building and publishing the image, with Docker or Podman: whichever answers (a Docker
# daemon first), or the one ENGINE names. The multi-arch target needs docker buildx
# (Docker Desktop, or `docker buildx create --use` once on Linux).
#   make image                                   this machine's architecture, loaded locally
#   make image-test                              that, then the image's smoke tests
#   make image-push REGISTRY=ghcr.io/you         amd64 and arm64, pushed
IMAGE ?= runpod-reconciler
REGISTRY ?=
TAG ?= $(shell python3 -c 'import tomllib; print(tomllib.load(open("pyproject.toml", "rb"))["project"]["version"])')
PLATFORMS ?= linux/amd64,linux/arm64
ENGINE ?= $(shell if docker info >/dev/null 2>&1; then echo docker; \
	elif command -v podman >/dev/null 2>&1; then echo podman; else echo docker; fi)
PYTHON ?= python3
REF = $(if $(REGISTRY),$(REGISTRY)/)$(IMAGE):$(TAG)

.PHONY: image image-test image-push

image:
	$(ENGINE) build --tag $(REF) .

# The smoke tests use the image just built rather than building one of their own.
image-test: image
	RECONCILER_TEST_ENGINE=$(ENGINE) RECONCILER_TEST_IMAGE=$(REF) $(PYTHON) -m pytest -q -m image

image-push:
	docker buildx build --platform $(PLATFORMS) --tag $(REF) --push .
