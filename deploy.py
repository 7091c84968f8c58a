"""
beekeeper: provision a host, build the server image, place the model, start the service
and smoke-check it.

    pyinfra inventories/home.py deploy.py
"""

from pyinfra import host

from beekeeper.config import load_host_config
from tasks import docker_engine, model, preflight, server_image, service, smoke

# Bad host data stops here, with one line naming the key and the fix: nothing has run yet.
cfg = load_host_config(host.data)
# Host facts that rule the deploy out stop here too, before any change.
facts = preflight.check(cfg)

engine_ops = docker_engine.ensure(cfg, facts)
image, image_ops = server_image.ensure(cfg, facts)
model_ops = model.ensure(cfg)
check_ops = smoke.install()

for svc in cfg.services:
    changed, _ = service.ensure(cfg, svc, image, upstream=model_ops)
    smoke.check(cfg, svc, changed)
