"""Backbone-curve fitting: closed forms, signs against our FK, O(l^2) convergence (docs/gaits.md)."""
import numpy as np
import pytest

from snake_control.gaits import backbone as bb
from snake_control.gaits.backbone import MCCCurve

ALT = ['pitch', 'yaw'] * 16
L0 = 0.07
S_CRAWLER = MCCCurve(A1=4 * np.pi / (26 * L0), B1=4.8 * np.pi / (26 * L0), w1=4 * np.pi / (26 * L0),
                     phi1=-np.pi / 2,
                     B2=2.5 * np.pi / (26 * L0), w2=2 * np.pi / (26 * L0), psi0=0.2)


def aeh(a=1.0, eta=0.95, ls=14 * L0, phi1=0.3, psi0=0.1):
    c = 2 * np.pi / ls / np.sqrt(1 + a * a)
    return MCCCurve(A1=c, B1=c * eta, w1=4 * np.pi / ls, phi1=phi1, A2=a * c, B2=a * c * eta,
                    w2=4 * np.pi / ls,
                    phi2=phi1, psi0=psi0)


@pytest.mark.parametrize('curve', [
    MCCCurve(A1=0.0, B1=5.0, w1=2 * np.pi / 1.12, phi1=0.4),
    MCCCurve(A1=1.3, B1=-4.0, w1=3.0, phi1=-1.0, psi0=0.7),
    MCCCurve(A1=2.0, psi0=2.5),
    MCCCurve(A1=-0.25, G1=0.45, psi0=np.pi),            # rolling's conical arc: curvature linear in s
    MCCCurve(A1=0.3, G1=-2.0, B1=1.0, w1=4.0),
])
@pytest.mark.parametrize('s0', [0.0, 0.37])
def test_serpenoid_closed_form_equals_quadrature(curve, s0):
    cf = bb.serpenoid_joint_angles(curve, ALT, L0, s0)
    quad = bb.joint_angles_quadrature(curve, ALT, L0, s0)
    np.testing.assert_allclose(cf, quad, rtol=0, atol=1e-9)


def test_serpenoid_matches_math_md_window_formula():
    a, b, w, phi = 0.8, 5.0, 2 * np.pi / 1.12, 0.4
    th = bb.joint_angles(MCCCurve(A1=a, B1=b, w1=w, phi1=phi), ALT, L0)
    s = np.arange(32) * L0
    expect = 2 * L0 * a + (2 * b / w) * np.sin(w * L0) * np.sin(w * s + phi)
    np.testing.assert_allclose(th[1::2], expect[1::2], atol=1e-12)
    np.testing.assert_array_equal(th[0::2], 0.0)


@pytest.mark.parametrize('r,p,psi0', [(0.1, 0.03, 0.3), (0.12, -0.05, -1.0), (0.2, 0.2, 0.0)])
def test_helix_closed_form_equals_quadrature_and_math_md(r, p, psi0):
    kappa, tau = r / (r * r + p * p), p / (r * r + p * p)
    c = MCCCurve(A1=kappa, A2=tau, psi0=psi0)
    cf = bb.helix_joint_angles(c, ALT, L0)
    np.testing.assert_allclose(cf, bb.joint_angles_quadrature(c, ALT, L0), rtol=0, atol=1e-9)
    s = np.arange(32) * L0
    amp = 2 * kappa * np.sin(tau * L0) / tau
    np.testing.assert_allclose(cf[1::2], amp * np.cos(tau * s + psi0)[1::2], atol=1e-12)
    # Pitch carries the derived minus sign (seed 004 writes +; docs/gaits.md).
    np.testing.assert_allclose(cf[0::2], -amp * np.sin(tau * s + psi0)[0::2], atol=1e-12)


@pytest.mark.parametrize('curve', [aeh(), aeh(a=-0.5, eta=0.3, phi1=-2.0, psi0=1.0),
                                   MCCCurve(A1=3.0, A2=1.5, B1=2.0, B2=1.0, w1=5.0, w2=5.0,
                                            phi1=0.2, phi2=0.2)])
def test_generalized_helix_closed_form_equals_quadrature(curve):
    assert curve.torsion_ratio is not None
    cf = bb.generalized_helix_joint_angles(curve, ALT, L0, 0.11)
    np.testing.assert_allclose(cf, bb.joint_angles_quadrature(curve, ALT, L0, 0.11), rtol=0, atol=1e-9)
    assert bb.joint_angles(curve, ALT, L0, 0.11) == pytest.approx(cf, abs=1e-15)


def test_dispatch_uses_quadrature_for_s_crawler():
    assert S_CRAWLER.torsion_ratio is None
    np.testing.assert_array_equal(bb.joint_angles(S_CRAWLER, ALT, L0),
                                  bb.joint_angles_quadrature(S_CRAWLER, ALT, L0))


def test_curve_integrator_reproduces_right_handed_helix():
    r, p = 0.1, 0.03
    c = MCCCurve(A1=r / (r * r + p * p), A2=p / (r * r + p * p))
    s = np.linspace(0, 2.0, 41)
    cc = np.sqrt(r * r + p * p)
    helix = np.stack([r * np.cos(s / cc), r * np.sin(s / cc), p * s / cc], 1)
    assert bb.kabsch_rms(bb.curve_points(c, s), helix) < 1e-9


def test_pitch_sign_builds_the_curve_not_its_mirror():
    """FK of the fitted joint angles follows the right-handed helix; the published + sign gives the mirror."""
    r, p = 0.1, 0.03
    c = MCCCurve(A1=r / (r * r + p * p), A2=p / (r * r + p * p), psi0=0.3)
    th = bb.joint_angles(c, ALT, L0)
    s, _, _ = bb.joint_windows(ALT, L0)
    cc = np.sqrt(r * r + p * p)
    helix = np.stack([r * np.cos(s / cc), r * np.sin(s / cc), p * s / cc], 1)
    good = bb.kabsch_rms(bb.chain_joint_positions(th, ALT, L0), helix)
    mirrored = th.copy()
    mirrored[0::2] *= -1
    bad = bb.kabsch_rms(bb.chain_joint_positions(mirrored, ALT, L0), helix)
    assert good < 0.2 * bad
    # and the refined chain gets much closer still
    th4 = bb.joint_angles(c, ['pitch', 'yaw'] * 64, L0 / 4)
    s4, _, _ = bb.joint_windows(['pitch', 'yaw'] * 64, L0 / 4)
    helix4 = np.stack([r * np.cos(s4 / cc), r * np.sin(s4 / cc), p * s4 / cc], 1)
    assert bb.kabsch_rms(bb.chain_joint_positions(th4, ['pitch', 'yaw'] * 64, L0 / 4), helix4) < good / 10


@pytest.mark.parametrize('name,curve', [
    ('serpentine', MCCCurve(A1=0.5, B1=5.0, w1=2 * np.pi / 1.12, phi1=0.3, psi0=0.4)),
    ('helix', MCCCurve(A1=7.5, A2=2.5, psi0=0.3)),
    ('conical helix', MCCCurve(A1=6.0, G1=1.5, A2=2.5, psi0=0.3)),
    ('s_crawler', S_CRAWLER),
    ('aeh', aeh()),
])
def test_chain_converges_as_l_squared(name, curve):
    body = 32 * L0
    errs = []
    for l in (L0, L0 / 2, L0 / 4):
        n = int(round(body / l))
        errs.append(bb.chain_fit_error(curve, ['pitch', 'yaw'] * (n // 2), l))
    for coarse, fine in zip(errs, errs[1:]):
        assert 4 / 1.2 < coarse / fine < 4 * 1.2, (name, errs)


def test_planar_chain_converges_as_l_squared():
    curve = MCCCurve(A1=0.3, B1=4.0, w1=5.0)
    errs = [bb.chain_fit_error(curve, ['yaw'] * int(round(2.0 / l)), l) for l in (0.1, 0.05, 0.025)]
    assert 4 / 1.2 < errs[0] / errs[1] < 4 * 1.2 and 4 / 1.2 < errs[1] / errs[2] < 4 * 1.2


def test_a_curvature_gradient_bends_the_curve_as_its_integral_says():
    # kappa = A1 + G1 s: the tangent turns by A1 s + G1 s^2 / 2 (kappa_integral), in the plane (tau = 0).
    curve = MCCCurve(A1=-0.5, G1=0.9)
    assert curve.torsion_ratio is None
    s, pos, frames = bb.integrate_curve(curve, 0.0, 2.0, 2000)
    heading = np.unwrap(np.arctan2(frames[:, 1, 0], frames[:, 0, 0]))
    np.testing.assert_allclose(heading, curve.kappa_integral(s), atol=1e-9)
    assert np.abs(pos[:, 2]).max() < 1e-12
    with pytest.raises(ValueError, match='G1'):
        bb.helix_joint_angles(MCCCurve(A1=1.0, A2=1.0, G1=0.1), ALT, L0)


def test_windows():
    s, lo, hi = bb.joint_windows(['pitch', 'yaw', 'pitch', 'yaw'], 0.1, 0.5)
    np.testing.assert_allclose(s, [0.5, 0.6, 0.7, 0.8])
    np.testing.assert_allclose(hi - lo, 0.2)
    np.testing.assert_allclose(s - lo, 0.1)
    s, lo, hi = bb.joint_windows(['yaw'] * 3, 0.1)
    np.testing.assert_allclose(hi - lo, 0.1)
    with pytest.raises(ValueError, match='axes'):
        bb.joint_windows(['roll'], 0.1)
    with pytest.raises(ValueError, match='spacing_m'):
        bb.joint_windows(['yaw'], 0.0)


def test_kabsch_is_rigid_only():
    rng = np.random.default_rng(1)
    p = rng.normal(size=(10, 3))
    q, _ = np.linalg.qr(rng.normal(size=(3, 3)))
    q *= np.sign(np.linalg.det(q))
    assert bb.kabsch_rms(p @ q.T + [1, 2, 3], p) < 1e-12
    mirror = p * [1, 1, -1]
    assert bb.kabsch_rms(mirror, p) > 0.1
    with pytest.raises(ValueError, match='points_m'):
        bb.kabsch_rms(p[:, :2], p[:, :2])


@pytest.mark.parametrize('s0', [0.0, 0.3, -1.7, 12.0])
def test_shifted_quadrature_equals_quadrature(s0):
    sq = bb.ShiftedQuadrature(S_CRAWLER, ALT, L0)
    np.testing.assert_allclose(sq.angles(s0), bb.joint_angles_quadrature(S_CRAWLER, ALT, L0, s0), atol=1e-12)
    flat = MCCCurve(A1=1.0, B1=2.0, w1=3.0, A2=0.5, B2=0.2, w2=0.0, phi2=0.4)
    np.testing.assert_allclose(bb.ShiftedQuadrature(flat, ALT, L0).angles(s0),
                               bb.joint_angles_quadrature(flat, ALT, L0, s0), atol=1e-12)


def test_quadrature_matches_adaptive_integration_for_s_crawler():
    from scipy.integrate import quad
    s, lo, hi = bb.joint_windows(ALT, L0, 0.21)
    th = bb.joint_angles_quadrature(S_CRAWLER, ALT, L0, 0.21)
    for i in range(0, 32, 5):
        if ALT[i] == 'yaw':
            f = lambda x: S_CRAWLER.kappa(x) * np.cos(S_CRAWLER.psi(x))  # noqa: E731
        else:
            f = lambda x: -S_CRAWLER.kappa(x) * np.sin(S_CRAWLER.psi(x))  # noqa: E731
        assert th[i] == pytest.approx(quad(f, lo[i], hi[i], epsabs=1e-13)[0], abs=1e-10)
    # psi in closed form agrees with integrating tau
    assert S_CRAWLER.psi(0.9) == pytest.approx(S_CRAWLER.psi0 + quad(S_CRAWLER.tau, 0, 0.9)[0], abs=1e-12)
