"""How the Ray backend picks what to join: only --ray-address joins a cluster (no Ray started here;
tests/test_doc_examples.py starts a private instance with RAY_ADDRESS set)."""

from __future__ import annotations

from suite.sweep.ray_backend import init_address


def test_without_ray_address_a_private_instance_starts_and_ray_address_is_ignored_aloud():
    # "local": plain ray.init() would join the cluster RAY_ADDRESS names, or the last `ray start` one
    assert init_address(None, {}) == ("local", None)
    assert init_address(None, {"RAY_ADDRESS": ""}) == ("local", None)
    target, note = init_address(None, {"RAY_ADDRESS": "10.0.0.1:6379"})
    assert target == "local"
    assert note == ("RAY_ADDRESS=10.0.0.1:6379 ignored: starting a private Ray instance; pass --ray-address "
                    "10.0.0.1:6379 to join that cluster")


def test_ray_address_joins_the_cluster_it_names_whatever_the_environment_says():
    assert init_address("10.0.0.2:6379", {"RAY_ADDRESS": "10.0.0.1:6379"}) == ("10.0.0.2:6379", None)
