"""The gait catalogue: the paper's gaits and parameterisations, serpenoid gaits, robot fit checks."""
import math

import numpy as np
import pytest
from scipy.integrate import quad

from snake_control.gaits import catalog
from snake_control.gaits.catalog import GaitShape, gait_spec, resolve_params
from snake_control.robot import load_robot


@pytest.fixture(scope='module')
def py32():
    return load_robot('pitch_yaw_32')


@pytest.fixture(scope='module')
def ks3():
    return load_robot('kinematic_snake_3')


def shape(name, robot, **over):
    spec = gait_spec(name)
    return GaitShape(spec, robot, resolve_params(spec, robot, over))


def test_serpentine_a1_zero_is_planar_with_zero_mean_yaw(py32):
    g = shape('serpentine', py32, A1=0.0)
    yaw = np.array([a == 'yaw' for a in py32.axes])
    phases = np.linspace(0, 2 * np.pi, 64, endpoint=False)
    qs = np.array([g.angles(ph) for ph in phases])
    assert np.all(qs[:, ~yaw] == 0.0)
    np.testing.assert_allclose(qs[:, yaw].mean(axis=0), 0.0, atol=1e-12)     # each joint, over a cycle
    assert np.abs(qs[:, yaw]).max() > 0.3
    # A1 turns: the mean yaw becomes 2 l A1 (docs/gaits.md serpenoid closed form)
    g1 = shape('serpentine', py32, A1=0.8)
    q1 = np.array([g1.angles(ph) for ph in phases])
    np.testing.assert_allclose(q1[:, yaw].mean(axis=0), 2 * py32.link_length_m * 0.8, atol=1e-12)
    # the turning command offsets A1
    np.testing.assert_allclose(g.angles(0.3, turn=0.8), g1.angles(0.3), atol=1e-15)


def test_rolling_is_an_arc_rotated_by_psi0(py32):
    g = shape('rolling', py32, A1=0.8, kappa_taper=0.0, psi0=0.0)
    yaw = np.array([a == 'yaw' for a in py32.axes])
    for psi in (0.0, 0.7, 2.0):
        q = g.angles(psi)
        np.testing.assert_allclose(q[yaw], 2 * py32.link_length_m * 0.8 * np.cos(psi), atol=1e-12)
        np.testing.assert_allclose(q[~yaw], -2 * py32.link_length_m * 0.8 * np.sin(psi), atol=1e-12)


def test_rolling_s_arc_is_conical_and_its_taper_is_the_turning_offset(py32):
    """kappa = A1 + kappa_taper (2x - 1) from the tail (x = 0) to the head (x = 1): each joint bends by
    the curvature at its own arc length times its window (2 l), the middle by 2 l A1; a turning offset
    adds to kappa_taper; the default starts with the arc's convex side toward +y (psi0 = pi: the yaw
    joints bend by -2 l A1 on average)."""
    l, n = py32.link_length_m, py32.n_joints
    x = np.arange(n) / (n - 1)
    g = shape('rolling', py32, A1=0.25, kappa_taper=0.5, psi0=0.0)
    yaw = np.array([a == 'yaw' for a in py32.axes])
    inner = np.arange(n)[1:-1]          # the end windows are cut symmetric, a little off the line
    want = 2 * l * (0.25 + 0.5 * (2 * x - 1))
    np.testing.assert_allclose(g.angles(0.0)[inner][yaw[inner]], want[inner][yaw[inner]], atol=1e-12)
    np.testing.assert_allclose(g.angles(0.4, turn=0.3), shape('rolling', py32, A1=0.25, kappa_taper=0.8,
                                                              psi0=0.0).angles(0.4), atol=1e-15)
    assert gait_spec('rolling').turn_param == 'kappa_taper'
    default = shape('rolling', py32)
    assert default.params['psi0'] == pytest.approx(np.pi)
    assert default.angles(0.0)[yaw].mean() == pytest.approx(-2 * l * default.params['A1'], rel=0.1)


def test_s_crawler_follows_the_paper(py32):
    l0 = py32.link_length_m
    # the paper's amplitudes (the defaults are lower: the paper's bend pitch_yaw_32 past its joint limits)
    curve, s0 = shape('s_crawler', py32, B1_pi_per_L=4.8, B2_pi_per_L=2.5).curve(0.0)
    big_l = 26 * l0
    assert s0 == 0.0
    assert curve.A1 == pytest.approx(4 * np.pi / big_l) and curve.w1 == pytest.approx(4 * np.pi / big_l)
    assert curve.B1 == pytest.approx(4.8 * np.pi / big_l) and curve.B2 == pytest.approx(2.5 * np.pi / big_l)
    assert curve.w2 == pytest.approx(2 * np.pi / big_l)
    assert quad(curve.tau, 0, big_l)[0] == pytest.approx(0.0, abs=1e-12)       # zero net torsion per cycle
    # lambda > 0: the paper's straight-section and bulge conditions (section 3.2.1)
    lam = 0.3
    c2, _ = shape('s_crawler', py32, lam=lam).curve(0.0)
    assert quad(c2.kappa, 0, lam * big_l / 2)[0] == pytest.approx(0.0, abs=1e-9)
    assert quad(c2.kappa, lam * big_l / 2, big_l / 2)[0] == pytest.approx(2 * np.pi, abs=1e-9)
    assert quad(c2.tau, 0, big_l)[0] == pytest.approx(0.0, abs=1e-9)
    # the body slides along the curve with the phase
    _, s0 = shape('s_crawler', py32).curve(np.pi)
    assert s0 == pytest.approx(big_l / 2)


def test_aeh_one_full_turn_per_period(py32):
    ls = 14 * py32.link_length_m
    curve, _ = shape('aeh_sidewinding', py32, a=1.0).curve(0.0)
    assert curve.torsion_ratio == pytest.approx(1.0)
    # The projection on the plane normal to the helix axis turns once per Ls: kappa_plane = kappa (1 + a^2)
    # and ds_plane = ds / sqrt(1 + a^2), so int kappa sqrt(1 + a^2) ds over Ls = 2 pi.
    turn = quad(curve.kappa, 0, ls)[0] * math.sqrt(2.0)
    assert turn == pytest.approx(2 * np.pi, rel=1e-10)
    # a = 0, eta = 0: a circle of circumference Ls
    flat, _ = shape('aeh_sidewinding', py32, a=0.0, eta=0.0).curve(0.0)
    assert flat.kappa(0.123) == pytest.approx(2 * np.pi / ls) and flat.tau(0.5) == 0.0


def test_compound_serpenoid_uses_axes_from_the_robot(py32):
    g = shape('sidewinding', py32, taper=0.0)
    p = g.params
    i = np.arange(py32.n_joints)
    yaw = np.array([a == 'yaw' for a in py32.axes])
    q = g.angles(0.4)
    np.testing.assert_allclose(q[yaw], (p['A_yaw'] * np.sin(p['w_s'] * i + 0.4 + p['delta']))[yaw])
    np.testing.assert_allclose(q[~yaw], (p['A_pitch'] * np.sin(p['w_s'] * i + 0.4))[~yaw])
    # conical sidewinding: amplitude grows from tail to head
    c = shape('conical_sidewinding', py32)
    amp = np.max(np.abs([c.angles(ph) for ph in np.linspace(0, 2 * np.pi, 64)]), axis=0)
    assert amp[-1] > amp[1] * 1.5
    # rolling: all joints share one phase
    r = shape('serpenoid_rolling', py32)
    q = r.angles(1.0)
    np.testing.assert_allclose(q[yaw], q[yaw][0])


def test_kinematic_snake_preset_is_seed_000(ks3):
    g = shape('kinematic_snake_preset', ks3)
    for t in (0.0, 0.5, 2.0):
        expect = [math.radians(40) * math.sin(t), math.radians(40) * math.sin(t + math.radians(25))]
        np.testing.assert_allclose(g.angles(t), expect, atol=1e-15)
    assert g.angles(0.5, turn=0.2) == pytest.approx(g.angles(0.5) + 0.2)


def test_gait_fit_checks(py32, ks3):
    assert 'serpentine' not in catalog.gaits_for(ks3)
    assert 'wheeled_undulation' not in catalog.gaits_for(py32)
    assert {'lateral_undulation', 'kinematic_snake_preset', 'straight'} <= set(catalog.gaits_for(ks3))
    with pytest.raises(ValueError, match="'sidewinding' needs a pitch_yaw robot"):
        catalog.check_gait_fits(gait_spec('sidewinding'), ks3)
    with pytest.raises(ValueError, match='unknown gait'):
        gait_spec('moonwalk')
    with pytest.raises(ValueError, match="A_pitch"):
        resolve_params(gait_spec('lateral_undulation'), ks3, {'A_pitch': 0.2})


@pytest.mark.parametrize('over,match', [
    ({'B9': 1.0}, "no parameter 'B9'"),
    ({'B1': 'abc'}, "'B1' .* must be a number"),
    ({'B1': float('nan')}, "'B1' .* must be finite"),
    ({'w1': -1.0}, r"'w1' .* must be in \[0"),
])
def test_parameter_validation_names_the_parameter(py32, over, match):
    with pytest.raises(ValueError, match=match):
        resolve_params(gait_spec('serpentine'), py32, over)


def test_every_gait_documents_its_parameters():
    for spec in catalog.GAITS.values():
        assert spec.description
        for p in spec.params:
            assert p.unit and p.meaning and p.describe_default()
        if spec.turn_param:
            assert spec.turn_param in spec.param_names


@pytest.mark.parametrize('name,over', [
    ('serpentine', {}), ('serpentine', {'A1': 0.5, 'psi0': 0.8, 'phi1': 0.3}), ('serpentine', {'w1': 0.0}),
    ('rolling', {'psi0': 1.0}), ('rolling', {'kappa_taper': -1.3, 'A1': 0.7}), ('helix_rolling', {'A2': -1.5, 'psi0': 0.4}), ('helix_rolling', {'A2': 0.0}),
    ('s_crawler', {}), ('s_crawler', {'lam': 0.4, 'psi0': 1.0}),
    ('aeh_sidewinding', {}), ('aeh_sidewinding', {'a': -0.7, 'eta': 0.3, 'phi1': 1.0, 'psi0': 0.5}),
    ('aeh_sidewinding', {'a': 0.0}),
])
def test_tabulated_mcc_shapes_equal_the_backbone_fit(py32, name, over):
    """GaitShape.angles (tabulated, per tick) equals backbone.joint_angles of GaitShape.curve."""
    g = shape(name, py32, **over)
    rng = np.random.default_rng(5)
    for phase in rng.uniform(-20, 20, 6):
        turn = rng.uniform(-1, 1) if g.spec.turn_param else 0.0
        np.testing.assert_allclose(g.angles(phase, turn), g.reference_angles(phase, turn), atol=1e-11)
