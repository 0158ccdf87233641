//! Early exits: `return` from the top, from inside a loop and from nested loops;
//! `loop` with `break` and `continue`; a `while` whose test reads a slice. The
//! generic versions carry the exits as flags through `while_loop`.

use gradlift::trace::{Int, Real, Var, cond, while_loop};
use gradlift::{Active, Const, Duplicated, autodiff};
use gradlift::{autodiff_forward, autodiff_reverse};

use super::common::{check_close, fd};
use super::{cat, check_generic, check_tangent, direction};

// The time a sampled signal first reaches `level`, interpolated linearly between
// samples: a `return` inside the loop, another before it, a value after it.

#[autodiff_reverse(d_crossing_time, Duplicated, Active, Active, Active)]
#[autodiff_forward(f_crossing_time, Dual, Dual, Dual, Dual)]
fn crossing_time(x: &[f64], level: f64, dt: f64) -> f64 {
    if x[0] >= level {
        return 0.0;
    }
    for i in 1..x.len() {
        if x[i] >= level {
            let frac = (level - x[i - 1]) / (x[i] - x[i - 1]);
            return (i as f64 - 1.0 + frac) * dt;
        }
    }
    x.len() as f64 * dt
}

fn crossing_time_g<T: Real>(x: T::Slice<'_>, level: T, dt: T) -> T {
    use gradlift::trace::SliceRead;
    let n = x.len();
    cond(
        x.at(0).ge(level),
        || T::lit(0.0),
        || {
            let (i, found) = while_loop(
                (T::Int::from(1), T::Bool::from(false)),
                |&(i, found)| i.lt(n) & !found,
                |(i, _)| {
                    cond(
                        x.at(i).ge(level),
                        || (i, T::Bool::from(true)),
                        || (i + 1, T::Bool::from(false)),
                    )
                },
            );
            cond(
                found,
                || {
                    let frac = (level - x.at(i - 1)) / (x.at(i) - x.at(i - 1));
                    (T::from_int(i) - 1.0 + frac) * dt
                },
                || T::from_int(n) * dt,
            )
        },
    )
}

#[test]
fn first_crossing() {
    let mut g = autodiff("crossing_time", crossing_time_g::<Var>).unwrap();
    let x = [0.0, 0.5, 1.2, 2.0, 1.0];
    assert_eq!(crossing_time(&x, 1.2, 0.1), 0.2);
    for (level, dt) in [(-0.5, 0.1), (1.0, 0.1), (1.9, 0.25), (5.0, 0.5)] {
        let y = crossing_time(&x, level, dt);
        assert_eq!(crossing_time_g::<f64>(&x, level, dt), y);
        let mut dx = [0.0; 5];
        let (v, dl, ddt) = d_crossing_time(&x, &mut dx, level, dt, 1.0);
        assert_eq!(v, y);
        let want = fd(
            |p| crossing_time(&p[..5], p[5], p[6]),
            &cat(&[&x, &[level, dt]]),
        );
        check_close(&cat(&[&dx, &[dl, ddt]]), &want);
        let vd = direction(7);
        let (fv, t) = f_crossing_time(&x, &vd[..5], level, vd[5], dt, vd[6]);
        assert_eq!(fv, y);
        check_tangent(t, &cat(&[&dx, &[dl, ddt]]), &vd);
        let mut gdx = [0.0; 5];
        let args = (Duplicated(&x[..], &mut gdx[..]), Active(level), Active(dt));
        let (gv, ((), gl, gdt)) = g.gradient(args).unwrap();
        assert_eq!(gv, y);
        check_generic(&cat(&[&dx, &[dl, ddt]]), &cat(&[&gdx, &[gl, gdt]]));
    }
}

// Piecewise-linear interpolation in a table with `Const` abscissae: returns at
// both ends, a `while` searching the interval (its test reads the slice).

#[autodiff_reverse(d_interp_table, Const, Duplicated, Active, Active)]
#[autodiff_forward(f_interp_table, Const, Dual, Dual, Dual)]
fn interp_table(xs: &[f64], ys: &[f64], t: f64) -> f64 {
    let n = xs.len();
    if t <= xs[0] {
        return ys[0];
    }
    if t >= xs[n - 1] {
        return ys[n - 1];
    }
    let mut k: usize = 1;
    while xs[k] < t {
        k += 1;
    }
    let w = (t - xs[k - 1]) / (xs[k] - xs[k - 1]);
    ys[k - 1] * (1.0 - w) + ys[k] * w
}

fn interp_table_g<T: Real>(xs: T::Slice<'_>, ys: T::Slice<'_>, t: T) -> T {
    use gradlift::trace::SliceRead;
    let n = xs.len();
    cond(
        t.le(xs.at(0)),
        || ys.at(0),
        || {
            cond(
                t.ge(xs.at(n - 1)),
                || ys.at(n - 1),
                || {
                    let k = while_loop(T::Int::from(1), |&k| xs.at(k).lt(t), |k| k + 1);
                    let w = (t - xs.at(k - 1)) / (xs.at(k) - xs.at(k - 1));
                    ys.at(k - 1) * (T::lit(1.0) - w) + ys.at(k) * w
                },
            )
        },
    )
}

#[test]
fn table_lookup() {
    let mut g = autodiff("interp_table", interp_table_g::<Var>).unwrap();
    let xs = [0.0, 0.5, 1.0, 2.5, 4.0];
    let ys = [1.0, -1.0, 2.0, 0.5, 3.0];
    assert_eq!(interp_table(&xs, &ys, 0.75), 0.5);
    for t in [-1.0, 0.3, 2.2, 3.1, 10.0] {
        let y = interp_table(&xs, &ys, t);
        assert_eq!(interp_table_g::<f64>(&xs, &ys, t), y);
        let mut dys = [0.0; 5];
        let (v, dt) = d_interp_table(&xs, &ys, &mut dys, t, 1.0);
        assert_eq!(v, y);
        let want = fd(|p| interp_table(&xs, &p[..5], p[5]), &cat(&[&ys, &[t]]));
        check_close(&cat(&[&dys, &[dt]]), &want);
        let vd = direction(6);
        let (fv, tangent) = f_interp_table(&xs, &ys, &vd[..5], t, vd[5]);
        assert_eq!(fv, y);
        check_tangent(tangent, &cat(&[&dys, &[dt]]), &vd);
        let mut gdys = [0.0; 5];
        let args = (
            Const(&xs[..]),
            Duplicated(&ys[..], &mut gdys[..]),
            Active(t),
        );
        let (gv, ((), (), gt)) = g.gradient(args).unwrap();
        assert_eq!(gv, y);
        check_generic(&cat(&[&dys, &[dt]]), &cat(&[&gdys, &[gt]]));
    }
}

// The first cell of a row-major grid above a threshold, scanned row by row: a
// `return` from the inner of two nested loops.

#[autodiff_reverse(d_first_hot_cell, Duplicated, Const, Active, Active)]
#[autodiff_forward(f_first_hot_cell, Dual, Const, Dual, Dual)]
fn first_hot_cell(grid: &[f64], cols: usize, thresh: f64) -> f64 {
    let rows = grid.len() / cols;
    let mut cool = 0.0;
    for r in 0..rows {
        for c in 0..cols {
            let v = grid[r * cols + c];
            if v > thresh {
                return (v - thresh).sqrt() * (1.0 + r as f64) + cool;
            }
            cool += 0.1 * v * v;
        }
    }
    cool
}

/// The two nested loops as one over the cells in the same order (`r * cols + c`).
fn first_hot_cell_g<T: Real>(grid: T::Slice<'_>, cols: T::Int, thresh: T) -> T {
    use gradlift::trace::SliceRead;
    let cells = grid.len() / cols * cols;
    let f = T::Bool::from(false);
    let init = (T::Int::from(0), T::lit(0.0), f, T::lit(0.0));
    let (_, cool, found, rv) = while_loop(
        init,
        |&(idx, _, found, _)| idx.lt(cells) & !found,
        |(idx, cool, _, rv)| {
            let v = grid.at(idx);
            let r = idx / cols;
            cond(
                v.gt(thresh),
                || {
                    let rv = (v - thresh).sqrt() * (T::from_int(r) + 1.0) + cool;
                    (idx, cool, T::Bool::from(true), rv)
                },
                || (idx + 1, cool + T::lit(0.1) * v * v, f, rv),
            )
        },
    );
    cond(found, || rv, || cool)
}

#[test]
fn nested_loop_return() {
    let mut g = autodiff("first_hot_cell", first_hot_cell_g::<Var>).unwrap();
    let grid = [0.2, 0.5, -0.4, 1.5, 0.3, 2.0];
    for thresh in [0.4, 1.0, 1.8, 3.0] {
        let y = first_hot_cell(&grid, 3, thresh);
        assert_eq!(first_hot_cell_g::<f64>(&grid, 3, thresh), y);
        let mut dg = [0.0; 6];
        let (v, dt) = d_first_hot_cell(&grid, &mut dg, 3, thresh, 1.0);
        assert_eq!(v, y);
        let want = fd(
            |p| first_hot_cell(&p[..6], 3, p[6]),
            &cat(&[&grid, &[thresh]]),
        );
        check_close(&cat(&[&dg, &[dt]]), &want);
        let vd = direction(7);
        let (fv, t) = f_first_hot_cell(&grid, &vd[..6], 3, thresh, vd[6]);
        assert_eq!(fv, y);
        check_tangent(t, &cat(&[&dg, &[dt]]), &vd);
        let mut gdg = [0.0; 6];
        let args = (
            Duplicated(&grid[..], &mut gdg[..]),
            Const(3),
            Active(thresh),
        );
        let (gv, ((), (), gt)) = g.gradient(args).unwrap();
        assert_eq!(gv, y);
        check_generic(&cat(&[&dg, &[dt]]), &cat(&[&gdg, &[gt]]));
    }
}

// The root of x^3 + a x - b by bisection on [-4, 4], finished by one Newton step
// once |f| is below `tol`: a `loop` with `continue`, `break` (the bracket is small
// enough, or `max_iter` is reached) and a `return` inside, `!`, `||`. Its
// derivative is the continuous part's: through the Newton step, and zero when the
// loop ends by `break` (the midpoint is piecewise constant).

#[autodiff_reverse(d_bisect_newton, Active, Active, Const, Const, Active)]
#[autodiff_forward(f_bisect_newton, Dual, Dual, Const, Const, Dual)]
fn bisect_newton(a: f64, b: f64, tol: f64, max_iter: usize) -> f64 {
    let mut lo = -4.0;
    let mut hi = 4.0;
    let mut it: usize = 0;
    loop {
        it += 1;
        let mid = 0.5 * (lo + hi);
        let fm = mid * mid * mid + a * mid - b;
        if fm.abs() < tol {
            return mid - fm / (3.0 * mid * mid + a);
        }
        if hi - lo < 1e-9 || it >= max_iter {
            break;
        }
        if !(fm < 0.0) {
            hi = mid;
            continue;
        }
        lo = mid;
    }
    0.5 * (lo + hi)
}

fn bisect_newton_g<T: Real>(a: T, b: T, tol: T, max_iter: T::Int) -> T {
    let (f, t) = (T::Bool::from(false), T::Bool::from(true));
    let init = (
        T::lit(-4.0),
        T::lit(4.0),
        T::Int::from(0),
        f,
        f,
        T::lit(0.0),
    );
    let (lo, hi, _, returned, _, rv) = while_loop(
        init,
        |&(_, _, _, returned, broken, _)| !(returned | broken),
        |(lo, hi, it, _, _, rv)| {
            let it = it + 1;
            let mid = (lo + hi) * 0.5;
            let fm = mid * mid * mid + a * mid - b;
            cond(
                fm.abs().lt(tol),
                || (lo, hi, it, t, f, mid - fm / (T::lit(3.0) * mid * mid + a)),
                || {
                    cond(
                        (hi - lo).lt(1e-9) | it.ge(max_iter),
                        || (lo, hi, it, f, t, rv),
                        || {
                            cond(
                                !fm.lt(0.0),
                                || (lo, mid, it, f, f, rv),
                                || (mid, hi, it, f, f, rv),
                            )
                        },
                    )
                },
            )
        },
    );
    cond(returned, || rv, || (lo + hi) * 0.5)
}

#[test]
fn bisection_with_newton_finish() {
    let mut g = autodiff("bisect_newton", bisect_newton_g::<Var>).unwrap();
    // f(1) = 0 for a = 1, b = 2: the third midpoint is the root.
    assert_eq!(bisect_newton(1.0, 2.0, 1e-2, 100), 1.0);
    for (a, b, tol, max_iter) in [
        (1.0, 2.0, 1e-2, 100),
        (3.0, -5.0, 1e-2, 100),
        (0.5, 10.0, 1e-3, 100),
        (0.5, 0.3, 0.0, 5),
        (2.0, 7.0, 0.0, 200),
    ] {
        let y = bisect_newton(a, b, tol, max_iter);
        let m = max_iter as i64;
        assert_eq!(bisect_newton_g::<f64>(a, b, tol, m), y);
        let (v, da, db) = d_bisect_newton(a, b, tol, max_iter, 1.0);
        assert_eq!(v, y);
        if tol > 0.0 || max_iter < 10 {
            check_close(
                &[da, db],
                &fd(|p| bisect_newton(p[0], p[1], tol, max_iter), &[a, b]),
            );
        } else {
            // Bisection to 1e-9 with no Newton step: finite differences of 1e-6
            // move the root across many midpoints and see the root's derivative,
            // while the function's own is zero.
            assert_eq!((da, db), (0.0, 0.0));
        }
        if tol > 0.0 {
            // Near the root, close to the root's derivatives -x/f' and 1/f'.
            let fp = 3.0 * y * y + a;
            assert!((da + y / fp).abs() < 1e-2 && (db - 1.0 / fp).abs() < 1e-2);
        }
        let vd = direction(2);
        let (fv, t) = f_bisect_newton(a, vd[0], b, vd[1], tol, max_iter);
        assert_eq!(fv, y);
        check_tangent(t, &[da, db], &vd);
        let args = (Active(a), Active(b), Const(tol), Const(m));
        let (gv, (ga, gb, (), ())) = g.gradient(args).unwrap();
        assert_eq!(gv, y);
        check_generic(&[da, db], &[ga, gb]);
    }
}
