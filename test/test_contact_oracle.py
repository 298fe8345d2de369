"""validation.contact_oracle: the estimator's contact step on the true shape, and the Coulomb floor model."""
import math

import numpy as np
import pytest

from snake_control.estimation.contact import ContactSelector
from snake_control.robot import load_robot
from snake_control.kinematics.lie import se2_matrix
from snake_control.validation.contact_oracle import coulomb_planar_step, oracle_run, rule_contacts


def test_the_coulomb_step_recovers_a_rigid_planar_motion_without_slip():
    rng = np.random.default_rng(3)
    p0 = rng.uniform(-0.3, 0.3, (7, 2))
    true = (0.012, -0.004, 0.03)                 # the chassis moved by this; the contacts held
    m = se2_matrix(true)
    # A held point p0 (start frame) is, in the end frame, R^T (p0 - t).
    p1 = (p0 - m[:2, 2]) @ m[:2, :2]
    axes = np.tile([1.0, 0.0], (7, 1))
    x = coulomb_planar_step(p0, p1, axes, np.ones(7), 0.15, 0.9)
    assert x == pytest.approx(true, abs=1e-6)


def test_a_contact_that_slides_lengthwise_costs_less_than_one_that_slides_across():
    # Contact 0 lies along x and its skin point moved 1 cm along its own axis; contacts 1 and 2 lie along y on
    # either side and held. The step keeps the two that would have to slide across themselves: a lengthwise
    # slide costs mu_axial, a sideways one mu_lateral.
    p0 = np.array([[0.0, 0.0], [0.0, 0.2], [0.0, -0.2]])
    p1 = p0.copy()
    p1[0, 0] -= 0.01
    axes = np.array([[1.0, 0.0], [0.0, 1.0], [0.0, 1.0]])
    loads = np.array([3.0, 1.0, 1.0])              # contact 0 carries three times the others' load
    x = coulomb_planar_step(p0, p1, axes, loads, 0.15, 0.9)
    assert np.abs(x) == pytest.approx(np.zeros(3), abs=1e-5)
    # On a floor as slippery across as along, the most loaded contact holds and the other two slide.
    x = coulomb_planar_step(p0, p1, axes, loads, 0.9, 0.9)
    assert x[0] == pytest.approx(0.01, abs=1e-5)


def test_rules_are_named_and_an_unknown_one_is_refused():
    h = np.array([0.0, 0.0003, 0.004, 0.02])
    q = np.column_stack([np.arange(4) * 0.07, np.zeros(4), np.zeros(4)])
    sel = ContactSelector(0.0125, 0.025)
    assert rule_contacts('lowest 3', h, np.zeros(4, bool), q, sel)[0].tolist() == [True, True, True, False]
    assert rule_contacts('height < 0.5 mm', h, np.zeros(4, bool), q, sel)[0].tolist() == [True, True, False, False]
    with pytest.raises(ValueError, match="unknown contact rule 'lowest'"):
        rule_contacts('lowest', h, np.zeros(4, bool), q, sel)


@pytest.mark.slow
def test_serpenoid_sidewinding_s_error_is_the_contacts_the_estimator_picks():
    # On the true shape and attitude, the estimator's step follows serpenoid sidewinding when it is given the
    # modules MuJoCo loads (a few % of the distance) and loses it with the estimator's band of contacts
    # (more than the distance), so the band, not the floor model, is what misses issue 14's aim.
    r = oracle_run(load_robot('pitch_yaw_32'), 'sidewinding', (0.0, 0.2, 0.0), duration_s=4.0,
                   rules=('loaded', 'lowest 6', 'estimator band'))
    assert r.distance_m > 0.5
    assert r.error_pct('loaded') < 10.0
    assert r.error_pct('estimator band') > 3 * max(r.error_pct('loaded'), r.error_pct('lowest 6'))
    assert math.isfinite(r.turn_rad)
