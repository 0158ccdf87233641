//! `Autodiff::share`: one activity pattern as a `SharedGradient` (`Send + Sync`),
//! called from several threads with a `CallState` each, computes what the
//! `Autodiff` computes, with the same compiled code.

use gradlift::trace::prelude::*;
use gradlift::{Active, CallState, Const, Duplicated, Error, Return, SharedGradient, autodiff};

/// sum_i w_i^2 t.
fn loss<T: Real>(w: T::Slice<'_>, t: T) -> T {
    for_range(0, w.len(), T::lit(0.0), |i, acc| {
        acc + w.at(i) * w.at(i) * t
    })
}

type Dup<'a> = Duplicated<&'a [f64], &'a mut [f64]>;

#[test]
fn shared_is_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<SharedGradient<(Slice<f64>, Var), Var>>();
}

#[test]
fn shared_computes_what_autodiff_computes() -> Result<(), Error> {
    let mut f = autodiff("loss", loss::<Var>)?;
    let w = [1.0, -2.0, 3.0];
    let mut dw1 = [0.0; 3];
    let want = f.gradient((Duplicated(&w[..], &mut dw1[..]), Active(0.5)))?;
    // The pattern compiled by that call is shared, not compiled again.
    let g = f.share::<(Dup<'static>, Active)>(Return::Active)?;
    assert_eq!(f.patterns(), ["DA_A"]);
    let mut dw2 = [0.0; 3];
    let got = g.gradient(
        &mut CallState::new(),
        (Duplicated(&w[..], &mut dw2[..]), Active(0.5)),
    )?;
    assert_eq!((got, dw2), (want, dw1));
    assert_eq!(got, (7.0, ((), 14.0)));
    // A pullback seeds the return.
    let mut dw3 = [0.0; 3];
    let (v, ((), dt)) = g.pullback(
        &mut CallState::new(),
        &[2.0],
        (Duplicated(&w[..], &mut dw3[..]), Active(0.5)),
    )?;
    assert_eq!((v, dt, dw3), (7.0, 28.0, [2.0, -4.0, 6.0]));
    Ok(())
}

#[test]
fn threads_share_one_compiled_pattern() -> Result<(), Error> {
    let g =
        autodiff("loss", loss::<Var>)?.share::<(Const<&'static [f64]>, Active)>(Return::Active)?;
    std::thread::scope(|s| {
        for k in 0..8 {
            let g = &g;
            s.spawn(move || {
                let mut state = CallState::new();
                for n in 1..20 {
                    let w: Vec<f64> = (0..n).map(|i| (i + k) as f64).collect();
                    let sq: f64 = w.iter().map(|x| x * x).sum();
                    let t = k as f64;
                    let got = g.gradient(&mut state, (Const(&w[..]), Active(t))).unwrap();
                    assert_eq!(got, (sq * t, ((), sq)));
                }
            });
        }
    });
    Ok(())
}

#[test]
fn other_activities_are_refused() -> Result<(), Error> {
    let g =
        autodiff("loss", loss::<Var>)?.share::<(Const<&'static [f64]>, Active)>(Return::Active)?;
    let w = [1.0];
    let mut dw = [0.0];
    match g.gradient(
        &mut CallState::new(),
        (Duplicated(&w[..], &mut dw[..]), Active(1.0)),
    ) {
        Err(Error::BadArguments(m)) => assert_eq!(
            m,
            "the arguments' activities are DA, but this gradient was compiled for CA_A"
        ),
        r => panic!("expected BadArguments, got {r:?}"),
    }
    // The return's activity is part of the pattern.
    let c =
        autodiff("loss", loss::<Var>)?.share::<(Const<&'static [f64]>, Active)>(Return::Const)?;
    assert_eq!(c.ret(), Return::Const);
    assert_eq!(
        c.gradient(&mut CallState::new(), (Const(&w[..]), Active(2.0)))?,
        (2.0, ((), 0.0))
    );
    Ok(())
}
