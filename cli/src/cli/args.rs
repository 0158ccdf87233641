//! JSON arguments to interpreter values and interpreter values back to JSON.
//!
//! `--args` is a JSON array with one element per parameter: a number for a float (an
//! integer number is accepted too, and so are the strings "inf", "-inf", "nan"), an
//! integer for `i64`, `true`/`false` for `bool`, an array for a slice. Every
//! mismatch is an error naming the parameter by position, name and type
//! (`argument 2 (%n: i64) must be an integer, found 1.5`).
//!
//! On the way out, floats print as JSON numbers in their shortest round-trip form
//! (an `f32` in its own shortest form, so `0.1f32` prints `0.1`), and non-finite
//! floats as the strings "inf", "-inf", "nan". [`render`] writes one line of JSON
//! with a space after each `,` and `:`, keys in insertion order (serde_json's
//! `preserve_order`).
//!
//! `grad`'s `--seed` ([`seeds_from_json`]) and `--shadows` ([`shadows_from_json`])
//! and `jvp`'s `--tangents` and `hvp`'s `--direction` ([`tangents_from_json`]) are
//! read here too, with the same conventions and the same style of messages.

use gradlift_adjoint::Activity;
use gradlift_ir::interp::Val;
use gradlift_ir::{Elem, Type};
use serde_json::{Number, Value};

/// A parameter as error messages name it.
#[derive(Copy, Clone, Debug)]
pub(crate) struct Param<'a> {
    /// Its name in the text (without `%`), if it has one.
    pub name: Option<&'a str>,
    /// Its type.
    pub ty: Type,
}

impl Param<'_> {
    /// `%n: i64`, or `i64` for an unnamed parameter.
    pub fn describe(&self) -> String {
        match self.name {
            Some(name) => format!("%{name}: {}", self.ty),
            None => self.ty.to_string(),
        }
    }
}

/// Converts the JSON arguments of a call to `@func` with `params`.
pub(crate) fn from_json(
    func: &str,
    params: &[Param<'_>],
    json: &Value,
) -> Result<Vec<Val>, String> {
    let list = params
        .iter()
        .map(Param::describe)
        .collect::<Vec<_>>()
        .join(", ");
    let takes = match params.len() {
        1 => "1 argument".to_string(),
        n => format!("{n} arguments"),
    };
    let Some(items) = json.as_array() else {
        return Err(format!(
            "the arguments must be a JSON array with one element per parameter of \
             @{func} ({list}), found {}",
            describe(json)
        ));
    };
    if items.len() > params.len() {
        return Err(format!(
            "@{func} takes {takes} ({list}), found {}",
            items.len()
        ));
    }
    if let Some(k) = (items.len()..params.len()).next() {
        return Err(format!(
            "@{func} takes {takes} ({list}), found {}: argument {} ({}) is missing",
            items.len(),
            k + 1,
            params[k].describe()
        ));
    }
    params
        .iter()
        .zip(items)
        .enumerate()
        .map(|(k, (p, item))| {
            convert(p.ty, item).map_err(|e| format!("argument {} ({}){e}", k + 1, p.describe()))
        })
        .collect()
}

/// One argument of type `ty`. Errors start with a space or a comma, to follow the
/// parameter's description.
fn convert(ty: Type, json: &Value) -> Result<Val, String> {
    let elements = |elem: Elem| {
        json.as_array().ok_or_else(|| {
            format!(
                " must be an array of {elem} elements, found {}",
                describe(json)
            )
        })
    };
    let at = |j: usize| move |e: String| format!(", element {j},{e}");
    Ok(match ty {
        Type::F64 => Val::F64(float(json)?),
        Type::F32 => Val::F32(float32(json)?),
        Type::I64 => Val::I64(int(json)?),
        Type::Bool => Val::Bool(
            json.as_bool()
                .ok_or_else(|| format!(" must be true or false, found {}", describe(json)))?,
        ),
        Type::Slice { elem, .. } => {
            let items = elements(elem)?.iter().enumerate();
            match elem {
                Elem::F64 => Val::F64s(
                    items
                        .map(|(j, v)| float(v).map_err(at(j)))
                        .collect::<Result<_, _>>()?,
                ),
                Elem::F32 => Val::F32s(
                    items
                        .map(|(j, v)| float32(v).map_err(at(j)))
                        .collect::<Result<_, _>>()?,
                ),
                Elem::I64 => Val::I64s(
                    items
                        .map(|(j, v)| int(v).map_err(at(j)))
                        .collect::<Result<_, _>>()?,
                ),
            }
        }
    })
}

/// A float: any JSON number, or "inf", "-inf", "nan".
fn float(json: &Value) -> Result<f64, String> {
    match json {
        // With serde_json's `arbitrary_precision`, a number keeps its text and
        // `as_f64` is Rust's correctly rounded parse (`None` beyond f64's range).
        Value::Number(n) => n.as_f64(),
        Value::String(s) => match s.as_str() {
            "inf" => Some(f64::INFINITY),
            "-inf" => Some(f64::NEG_INFINITY),
            "nan" => Some(f64::NAN),
            _ => None,
        },
        _ => None,
    }
    .ok_or_else(|| {
        format!(
            " must be a number (or \"inf\", \"-inf\", \"nan\"), found {}",
            describe(json)
        )
    })
}

/// An `f32`: a float that is finite in `f32` if it is finite at all.
///
/// A number's decimal text is rounded to `f32` directly (never through `f64`, whose
/// double rounding is one `f32` ulp off for a few decimals).
fn float32(json: &Value) -> Result<f32, String> {
    let x = float(json)?;
    let y = match json {
        Value::Number(n) => n.to_string().parse::<f32>().unwrap_or(x as f32),
        _ => x as f32,
    };
    if x.is_finite() && !y.is_finite() {
        return Err(format!(
            " is out of range for f32, found {}",
            describe(json)
        ));
    }
    Ok(y)
}

/// An `i64`: an integer JSON number in range.
fn int(json: &Value) -> Result<i64, String> {
    match json {
        Value::Number(n) => match n.as_i64() {
            Some(i) => Ok(i),
            // Digits alone (with `arbitrary_precision`, the number as written): an
            // integer, too big or too small either way.
            None if is_integer_literal(&n.to_string()) => {
                Err(format!(" is out of range for i64, found {n}"))
            }
            None => Err(format!(" must be an integer, found {n}")),
        },
        _ => Err(format!(" must be an integer, found {}", describe(json))),
    }
}

/// `-?[0-9]+`: a JSON number written as an integer.
fn is_integer_literal(text: &str) -> bool {
    let digits = text.strip_prefix('-').unwrap_or(text);
    !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
}

/// A JSON value as an error message shows what was found.
fn describe(json: &Value) -> String {
    match json {
        Value::Null => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(_) => json.to_string(),
        Value::Array(a) => format!("an array of {} elements", a.len()),
        Value::Object(_) => "an object".into(),
    }
}

/// `--seed` at `width` (`grad --width`): at width 1 a number (one float result)
/// or an array of numbers (one per float result of `@func`, which has `n_float` of
/// them); at width N, N numbers per float result (see [`lane_seeds_from_json`]).
pub(crate) fn seeds_from_json(
    func: &str,
    n_float: usize,
    width: usize,
    json: &Value,
) -> Result<Vec<f64>, String> {
    if width > 1 {
        return lane_seeds_from_json(func, n_float, width, json);
    }
    let results = match n_float {
        1 => "1 float result".to_string(),
        n => format!("{n} float results"),
    };
    match json {
        Value::Array(items) if items.is_empty() && n_float == 0 => Ok(Vec::new()),
        _ if n_float == 0 => Err(format!(
            "--seed: @{func} has no float results, so it takes no seed"
        )),
        Value::Array(items) if items.len() == n_float => items
            .iter()
            .enumerate()
            .map(|(j, v)| float(v).map_err(|e| format!("--seed, element {j},{e}")))
            .collect(),
        Value::Array(items) => Err(format!(
            "--seed: @{func} has {results}, so it takes {}, found {}",
            match n_float {
                1 => "1 seed".to_string(),
                n => format!("{n} seeds"),
            },
            items.len()
        )),
        _ if n_float == 1 => Ok(vec![float(json).map_err(|e| format!("--seed{e}"))?]),
        _ => Err(format!(
            "--seed: @{func} has {results}, so the seed must be an array of {n_float} \
             numbers, found {}",
            describe(json)
        )),
    }
}

/// `--seed` at width N > 1: for one float result an array of N numbers (lane 0
/// first; an array holding that one array is taken too), for several an array with
/// one array of N numbers per float result, for none `[]`. The seeds come out as
/// the rule takes them: result `k`'s lane `j` at `k * N + j`.
fn lane_seeds_from_json(
    func: &str,
    n_float: usize,
    width: usize,
    json: &Value,
) -> Result<Vec<f64>, String> {
    let lanes = |item: &Value, at: &str| -> Result<Vec<f64>, String> {
        match item {
            Value::Array(xs) if xs.len() == width => xs
                .iter()
                .enumerate()
                .map(|(j, x)| float(x).map_err(|e| format!("--seed{at}, lane {j},{e}")))
                .collect(),
            _ => Err(format!(
                "--seed{at}: at --width {width}, a float result takes an array of {width} \
                 numbers (one seed per lane, lane 0 first), found {}",
                describe(item)
            )),
        }
    };
    let expected = match n_float {
        1 => format!("for its 1 float result an array of {width} numbers (lane 0 first)"),
        n => format!(
            "for its {n} float results an array of {n} arrays of {width} numbers (one per \
             float result, lane 0 first)"
        ),
    };
    let wrong = || {
        Err(format!(
            "--seed: at --width {width}, @{func} takes {width} seeds per float result: \
             {expected}, found {}",
            describe(json)
        ))
    };
    match json {
        Value::Array(items) if items.is_empty() && n_float == 0 => Ok(Vec::new()),
        _ if n_float == 0 => Err(format!(
            "--seed: @{func} has no float results, so it takes no seed"
        )),
        // One float result: its N lanes, or an array of that one array.
        Value::Array(items) if n_float == 1 && items.iter().all(|v| !v.is_array()) => {
            if items.len() == width {
                lanes(json, "")
            } else {
                wrong()
            }
        }
        Value::Array(items) if items.len() == n_float && items.iter().all(Value::is_array) => {
            let mut seeds = Vec::with_capacity(n_float * width);
            for (k, item) in items.iter().enumerate() {
                seeds.extend(lanes(item, &format!(", element {k}"))?);
            }
            Ok(seeds)
        }
        _ => wrong(),
    }
}

/// `--shadows`: one entry per parameter of `@func`, null or the initial contents of
/// the shadow of a `dup`/`dupnoneed` slice (`activities`), `width` times as long as
/// its argument in `args` (at width N, lane `j` of element `i` at `i * N + j`).
pub(crate) fn shadows_from_json(
    func: &str,
    params: &[Param<'_>],
    activities: &[Activity],
    args: &[Val],
    width: usize,
    json: &Value,
) -> Result<Vec<Option<Val>>, String> {
    let list = params
        .iter()
        .map(Param::describe)
        .collect::<Vec<_>>()
        .join(", ");
    let Some(items) = json.as_array() else {
        return Err(format!(
            "--shadows must be a JSON array with one element (null or a shadow) per \
             parameter of @{func} ({list}), found {}",
            describe(json)
        ));
    };
    if items.len() != params.len() {
        let takes = match params.len() {
            1 => "1 parameter".to_string(),
            n => format!("{n} parameters"),
        };
        return Err(format!(
            "--shadows: @{func} has {takes} ({list}), so it takes one element (null or a \
             shadow) per parameter, found {}",
            items.len()
        ));
    }
    let mut shadows = Vec::with_capacity(items.len());
    for (k, (p, item)) in params.iter().zip(items).enumerate() {
        let which = format!("argument {} ({})", k + 1, p.describe());
        if item.is_null() {
            shadows.push(None);
            continue;
        }
        let activity = activities.get(k).copied().unwrap_or(Activity::Const);
        if !matches!(activity, Activity::Dup | Activity::DupNoNeed) {
            return Err(format!(
                "--shadows: {which} is `{activity}`, so it has no shadow: give null \
                 (only `dup` and `dupnoneed` slices have shadows)"
            ));
        }
        let shadow =
            convert(p.ty, item).map_err(|e| format!("--shadows: the shadow of {which}{e}"))?;
        let (n, m) = (shadow.slice_len(), args.get(k).and_then(Val::slice_len));
        if let (Some(n), Some(m)) = (n, m)
            && n != m * width
        {
            return Err(if width == 1 {
                format!(
                    "--shadows: the shadow of {which} must have {m} elements, as the \
                     argument has, found {n}"
                )
            } else {
                format!(
                    "--shadows: at --width {width}, the shadow of {which} must have {} \
                     elements ({width} lanes for each of the argument's {m}, lane j of \
                     element i at i*{width}+j), found {n}",
                    m * width
                )
            });
        }
        shadows.push(Some(shadow));
    }
    Ok(shadows)
}

/// Which option a list of tangents comes from, for the messages: `jvp`'s
/// `--tangents` or `hvp`'s `--direction`.
#[derive(Copy, Clone, Debug)]
pub(crate) struct TangentsOption {
    /// The option, as the messages name it (`--tangents`).
    pub option: &'static str,
    /// One of its entries (`tangent`).
    pub noun: &'static str,
}

/// `jvp`'s `--tangents`.
pub(crate) const TANGENTS: TangentsOption = TangentsOption {
    option: "--tangents",
    noun: "tangent",
};

/// `hvp`'s `--direction`.
pub(crate) const DIRECTION: TangentsOption = TangentsOption {
    option: "--direction",
    noun: "direction",
};

/// `--tangents` (or `--direction`, as `which` says): one entry per parameter of
/// `@func`, null or a tangent: a number or an array of numbers, read as the
/// parameter's float type (`f32` for `f32` and `[f32]`, `f64` for every other).
/// Only the JSON is checked here; whether an entry fits its parameter (its
/// activity, a scalar or N lanes, the length) and whether there is one per
/// parameter is for the library's calling convention
/// ([`jvp_vals`](gradlift_adjoint::jvp_vals()),
/// [`hvp_vals`](gradlift_adjoint::hvp_vals())) to say.
pub(crate) fn tangents_from_json(
    func: &str,
    params: &[Param<'_>],
    json: &Value,
    which_option: TangentsOption,
) -> Result<Vec<Option<Val>>, String> {
    let TangentsOption { option, noun } = which_option;
    let Some(items) = json.as_array() else {
        let list = params
            .iter()
            .map(Param::describe)
            .collect::<Vec<_>>()
            .join(", ");
        return Err(format!(
            "{option} must be a JSON array with one element (a {noun} or null) per \
             parameter of @{func} ({list}), found {}",
            describe(json)
        ));
    };
    items
        .iter()
        .enumerate()
        .map(|(k, item)| {
            let param = params.get(k);
            let which = match param {
                Some(p) => format!("argument {} ({})", k + 1, p.describe()),
                None => format!("argument {}", k + 1),
            };
            let f32 = param.is_some_and(|p| {
                matches!(
                    p.ty,
                    Type::F32
                        | Type::Slice {
                            elem: Elem::F32,
                            ..
                        }
                )
            });
            let at = |j: usize| move |e: String| format!(", element {j},{e}");
            let tangent = match item {
                Value::Null => return Ok(None),
                Value::Array(xs) if f32 => xs
                    .iter()
                    .enumerate()
                    .map(|(j, x)| float32(x).map_err(at(j)))
                    .collect::<Result<_, _>>()
                    .map(Val::F32s),
                Value::Array(xs) => xs
                    .iter()
                    .enumerate()
                    .map(|(j, x)| float(x).map_err(at(j)))
                    .collect::<Result<_, _>>()
                    .map(Val::F64s),
                Value::Number(_) | Value::String(_) if f32 => float32(item).map(Val::F32),
                Value::Number(_) | Value::String(_) => float(item).map(Val::F64),
                _ => Err(format!(
                    " must be a number, an array of numbers or null, found {}",
                    describe(item)
                )),
            };
            tangent
                .map(Some)
                .map_err(|e| format!("{option}: the {noun} of {which}{e}"))
        })
        .collect()
}

/// The results of a call as `run` and `grad` print `value`: null for none, the one
/// result itself, an array for several.
pub(crate) fn results_json(results: &[Val]) -> Value {
    match results {
        [] => Value::Null,
        [one] => to_json(one),
        several => several.iter().map(to_json).collect(),
    }
}

/// An interpreter value as JSON.
pub(crate) fn to_json(val: &Val) -> Value {
    match val {
        Val::F64(x) => f64_json(*x),
        Val::F32(x) => f32_json(*x),
        Val::I64(i) => Value::from(*i),
        Val::Bool(b) => Value::Bool(*b),
        Val::F64s(xs) => xs.iter().map(|&x| f64_json(x)).collect(),
        Val::F32s(xs) => xs.iter().map(|&x| f32_json(x)).collect(),
        Val::I64s(xs) => xs.iter().map(|&i| Value::from(i)).collect(),
    }
}

/// A float as a JSON number, or "inf", "-inf", "nan".
fn f64_json(x: f64) -> Value {
    match Number::from_f64(x) {
        Some(n) => Value::Number(n),
        None if x.is_nan() => Value::from("nan"),
        None if x > 0.0 => Value::from("inf"),
        None => Value::from("-inf"),
    }
}

/// An `f32` through its own shortest decimal, so `0.1f32` prints `0.1` rather than
/// the `0.10000000149011612` its widening to `f64` would print.
fn f32_json(x: f32) -> Value {
    let shortest = x.to_string().parse::<f64>().unwrap_or(f64::from(x));
    f64_json(shortest)
}

/// One line of JSON with `", "` and `": "` separators, object keys in insertion order.
pub(crate) fn render(json: &Value) -> String {
    let mut out = String::new();
    write(json, &mut out);
    out
}

fn write(json: &Value, out: &mut String) {
    match json {
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write(item, out);
            }
            out.push(']');
        }
        Value::Object(fields) => {
            out.push('{');
            for (i, (key, item)) in fields.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                // A string's `Display` is its JSON form, quoted and escaped.
                out.push_str(&Value::from(key.as_str()).to_string());
                out.push_str(": ");
                write(item, out);
            }
            out.push('}');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const F64: Type = Type::F64;
    const I64: Type = Type::I64;

    fn p(name: &'static str, ty: Type) -> Param<'static> {
        Param {
            name: Some(name),
            ty,
        }
    }

    #[track_caller]
    fn ok(params: &[Param<'_>], args: &str, expected: &[Val]) {
        let json: Value = serde_json::from_str(args).expect("test JSON");
        match from_json("f", params, &json) {
            Ok(vals) => assert_eq!(vals, expected, "{args}"),
            Err(e) => panic!("{args}: {e}"),
        }
    }

    #[track_caller]
    fn err(params: &[Param<'_>], args: &str, expected: &str) {
        let json: Value = serde_json::from_str(args).expect("test JSON");
        match from_json("f", params, &json) {
            Ok(vals) => panic!("{args}: expected an error, got {vals:?}"),
            Err(e) => assert_eq!(e, expected, "{args}"),
        }
    }

    #[test]
    fn scalars_convert() {
        ok(
            &[
                p("x", F64),
                p("n", I64),
                p("b", Type::Bool),
                p("y", Type::F32),
            ],
            "[1.5, -7, true, 0.1]",
            &[Val::F64(1.5), Val::I64(-7), Val::Bool(true), Val::F32(0.1)],
        );
        ok(&[p("x", F64)], "[3]", &[Val::F64(3.0)]);
        ok(
            &[p("n", I64)],
            "[9223372036854775807]",
            &[Val::I64(i64::MAX)],
        );
        ok(&[], "[]", &[]);
    }

    /// Decimals round to the nearest float of the parameter's type, directly.
    #[test]
    fn floats_are_correctly_rounded() {
        // Just above the midpoint between 1.0f32 and the next f32: it is the midpoint
        // in f64, from which ties-to-even would give 1.0; the nearest f32 is above.
        let above_midpoint = 1.0 + f64::from(f32::EPSILON) / 2.0;
        assert_eq!(above_midpoint.to_bits(), 0x3FF0_0000_1000_0000);
        ok(
            &[p("y", Type::F32)],
            "[1.0000000596046447753906251]",
            &[Val::F32(1.0 + f32::EPSILON)],
        );
        // A decimal that is hard to round: the largest subnormal f64.
        ok(
            &[p("x", F64)],
            "[2.2250738585072011e-308]",
            &[Val::F64(f64::from_bits(0x000F_FFFF_FFFF_FFFF))],
        );
    }

    #[test]
    fn non_finite_floats_are_strings() {
        let json: Value = serde_json::from_str(r#"["inf", "-inf", "nan"]"#).unwrap();
        let vals = from_json("f", &[p("a", F64), p("b", F64), p("c", Type::F32)], &json).unwrap();
        assert_eq!(vals[0], Val::F64(f64::INFINITY));
        assert_eq!(vals[1], Val::F64(f64::NEG_INFINITY));
        assert!(matches!(vals[2], Val::F32(x) if x.is_nan()));
    }

    #[test]
    fn slices_convert_per_element_type() {
        ok(
            &[
                p("x", Type::slice(Elem::F64)),
                p("y", Type::slice_mut(Elem::F32)),
                p("l", Type::slice(Elem::I64)),
                p("e", Type::slice(Elem::F64)),
            ],
            r#"[[1, 2.5, "-inf"], [0.5], [3, -4], []]"#,
            &[
                Val::F64s(vec![1.0, 2.5, f64::NEG_INFINITY]),
                Val::F32s(vec![0.5]),
                Val::I64s(vec![3, -4]),
                Val::F64s(vec![]),
            ],
        );
    }

    #[test]
    fn kind_mismatches_name_the_parameter() {
        err(
            &[p("x", F64), p("n", I64)],
            "[1.0, 1.5]",
            "argument 2 (%n: i64) must be an integer, found 1.5",
        );
        err(
            &[p("n", I64)],
            "[2.0]",
            "argument 1 (%n: i64) must be an integer, found 2.0",
        );
        err(
            &[p("n", I64)],
            "[18446744073709551615]",
            "argument 1 (%n: i64) is out of range for i64, found 18446744073709551615",
        );
        // Just past either end: both out of range, in the same words.
        err(
            &[p("n", I64)],
            "[9223372036854775808]",
            "argument 1 (%n: i64) is out of range for i64, found 9223372036854775808",
        );
        err(
            &[p("n", I64)],
            "[-9223372036854775809]",
            "argument 1 (%n: i64) is out of range for i64, found -9223372036854775809",
        );
        err(
            &[p("n", I64)],
            "[1e3]",
            "argument 1 (%n: i64) must be an integer, found 1e+3",
        );
        err(
            &[p("x", F64)],
            r#"["one"]"#,
            r#"argument 1 (%x: f64) must be a number (or "inf", "-inf", "nan"), found "one""#,
        );
        err(
            &[p("c", Type::Bool)],
            "[1]",
            "argument 1 (%c: bool) must be true or false, found 1",
        );
        err(
            &[p("x", Type::slice(Elem::F64))],
            "[1.0]",
            "argument 1 (%x: [f64]) must be an array of f64 elements, found 1.0",
        );
        err(
            &[p("x", Type::slice_mut(Elem::I64))],
            "[[1, 2, null]]",
            "argument 1 (%x: mut [i64]), element 2, must be an integer, found null",
        );
        err(
            &[p("x", F64)],
            "[[1.0]]",
            r#"argument 1 (%x: f64) must be a number (or "inf", "-inf", "nan"), found an array of 1 elements"#,
        );
        err(
            &[p("y", Type::F32)],
            "[1e39]",
            "argument 1 (%y: f32) is out of range for f32, found 1e+39",
        );
        err(
            &[Param {
                name: None,
                ty: Type::Bool,
            }],
            "[{}]",
            "argument 1 (bool) must be true or false, found an object",
        );
    }

    #[test]
    fn count_mismatches_name_the_parameters() {
        let params = [p("x", Type::slice(Elem::F64)), p("n", I64)];
        err(
            &params,
            "[[1.0]]",
            "@f takes 2 arguments (%x: [f64], %n: i64), found 1: argument 2 (%n: i64) is missing",
        );
        err(
            &params,
            "[[1.0], 2, 3]",
            "@f takes 2 arguments (%x: [f64], %n: i64), found 3",
        );
        err(
            &[p("x", F64)],
            "[]",
            "@f takes 1 argument (%x: f64), found 0: argument 1 (%x: f64) is missing",
        );
        err(
            &params,
            r#"{"x": 1}"#,
            "the arguments must be a JSON array with one element per parameter of @f \
             (%x: [f64], %n: i64), found an object",
        );
    }

    #[test]
    fn values_print_shortest_and_non_finite_as_strings() {
        let cases = [
            (Val::F64(0.1), "0.1"),
            (Val::F64(7.0), "7.0"),
            (Val::F64(-0.0), "-0.0"),
            (Val::F64(1e300), "1e+300"),
            (Val::F32(0.1), "0.1"),
            (Val::F32(16777216.0), "16777216.0"),
            (Val::F32(f32::MAX), "3.4028235e+38"),
            (Val::F32(f32::NEG_INFINITY), r#""-inf""#),
            (Val::F64(f64::INFINITY), r#""inf""#),
            (Val::F64(f64::NAN), r#""nan""#),
            (Val::I64(-3), "-3"),
            (Val::Bool(false), "false"),
            (Val::F64s(vec![1.0, f64::NAN]), r#"[1.0, "nan"]"#),
            (Val::F32s(vec![0.2, 1e-45]), "[0.2, 1e-45]"),
            (Val::I64s(vec![]), "[]"),
        ];
        for (val, text) in cases {
            assert_eq!(render(&to_json(&val)), text, "{val:?}");
        }
    }

    #[test]
    fn render_keeps_key_order_and_spaces() {
        let out = json!({"value": [1.5, 2], "args": [null, [0.25]], "time": {"primal_ns": 12}});
        assert_eq!(
            render(&out),
            r#"{"value": [1.5, 2], "args": [null, [0.25]], "time": {"primal_ns": 12}}"#
        );
    }

    #[test]
    fn every_printed_float_reads_back_exactly() {
        for x in [0.1, 1.0 / 3.0, 5e-324, f64::MAX, -123456.789e-10] {
            let text = render(&to_json(&Val::F64(x)));
            assert_eq!(
                text.parse::<f64>().map(f64::to_bits),
                Ok(x.to_bits()),
                "{text}"
            );
        }
    }

    #[test]
    fn seeds_are_one_number_per_float_result() {
        let seeds = |n: usize, text: &str| {
            let json: Value = serde_json::from_str(text).expect("test JSON");
            seeds_from_json("f", n, 1, &json)
        };
        assert_eq!(seeds(1, "2"), Ok(vec![2.0]));
        assert_eq!(seeds(1, "[-0.5]"), Ok(vec![-0.5]));
        assert_eq!(seeds(2, r#"[1, "-inf"]"#), Ok(vec![1.0, f64::NEG_INFINITY]));
        assert_eq!(seeds(0, "[]"), Ok(vec![]));
        assert_eq!(
            seeds(0, "1"),
            Err("--seed: @f has no float results, so it takes no seed".into())
        );
        assert_eq!(
            seeds(2, "1"),
            Err(
                "--seed: @f has 2 float results, so the seed must be an array of 2 numbers, \
                 found 1"
                    .into()
            )
        );
        assert_eq!(
            seeds(1, "[1, 2]"),
            Err("--seed: @f has 1 float result, so it takes 1 seed, found 2".into())
        );
        assert_eq!(
            seeds(1, "null"),
            Err(r#"--seed must be a number (or "inf", "-inf", "nan"), found null"#.into())
        );
    }

    #[test]
    fn seeds_at_width_n_are_n_lanes_per_float_result() {
        let seeds = |n: usize, text: &str| {
            let json: Value = serde_json::from_str(text).expect("test JSON");
            seeds_from_json("f", n, 3, &json)
        };
        assert_eq!(seeds(1, "[1, 2, -3]"), Ok(vec![1.0, 2.0, -3.0]));
        assert_eq!(seeds(1, "[[1, 2, -3]]"), Ok(vec![1.0, 2.0, -3.0]));
        // Result k's lane j at k * 3 + j.
        assert_eq!(
            seeds(2, r#"[[1, 2, 3], [4, 5, "inf"]]"#),
            Ok(vec![1.0, 2.0, 3.0, 4.0, 5.0, f64::INFINITY])
        );
        assert_eq!(seeds(0, "[]"), Ok(vec![]));
        assert_eq!(
            seeds(0, "[1, 2, 3]"),
            Err("--seed: @f has no float results, so it takes no seed".into())
        );
        assert_eq!(
            seeds(1, "2"),
            Err(
                "--seed: at --width 3, @f takes 3 seeds per float result: for its 1 float \
                 result an array of 3 numbers (lane 0 first), found 2"
                    .into()
            )
        );
        assert_eq!(
            seeds(1, "[1, 2]"),
            Err(
                "--seed: at --width 3, @f takes 3 seeds per float result: for its 1 float \
                 result an array of 3 numbers (lane 0 first), found an array of 2 elements"
                    .into()
            )
        );
        assert_eq!(
            seeds(2, "[1, 2, 3, 4, 5, 6]"),
            Err(
                "--seed: at --width 3, @f takes 3 seeds per float result: for its 2 float \
                 results an array of 2 arrays of 3 numbers (one per float result, lane 0 \
                 first), found an array of 6 elements"
                    .into()
            )
        );
        assert_eq!(
            seeds(2, "[[1, 2, 3], [4, 5]]"),
            Err(
                "--seed, element 1: at --width 3, a float result takes an array of 3 \
                 numbers (one seed per lane, lane 0 first), found an array of 2 elements"
                    .into()
            )
        );
        assert_eq!(
            seeds(1, "[1, null, 3]"),
            Err(r#"--seed, lane 1, must be a number (or "inf", "-inf", "nan"), found null"#.into())
        );
    }

    #[test]
    fn shadows_at_width_n_are_n_lanes_per_element() {
        let params = [p("x", Type::slice(Elem::F64)), p("a", F64)];
        let activities = [Activity::Dup, Activity::Active];
        let args = [Val::F64s(vec![1.0, 2.0]), Val::F64(4.0)];
        let shadows = |text: &str| {
            let json: Value = serde_json::from_str(text).expect("test JSON");
            shadows_from_json("f", &params, &activities, &args, 2, &json)
        };
        assert_eq!(
            shadows("[[1, 0, 0, 1], null]"),
            Ok(vec![Some(Val::F64s(vec![1.0, 0.0, 0.0, 1.0])), None])
        );
        assert_eq!(
            shadows("[[1, 0], null]"),
            Err(
                "--shadows: at --width 2, the shadow of argument 1 (%x: [f64]) must have 4 \
                 elements (2 lanes for each of the argument's 2, lane j of element i at \
                 i*2+j), found 2"
                    .into()
            )
        );
    }

    #[test]
    fn shadows_are_checked_against_activities_and_arguments() {
        use Activity::{Active, Const, Dup, DupNoNeed};
        let params = [
            p("x", Type::slice(Elem::F64)),
            p("y", Type::slice_mut(Elem::F32)),
            p("a", F64),
            p("c", Type::slice(Elem::F64)),
        ];
        let activities = [Dup, DupNoNeed, Active, Const];
        let args = [
            Val::F64s(vec![1.0, 2.0]),
            Val::F32s(vec![3.0]),
            Val::F64(4.0),
            Val::F64s(vec![]),
        ];
        let shadows = |text: &str| {
            let json: Value = serde_json::from_str(text).expect("test JSON");
            shadows_from_json("f", &params, &activities, &args, 1, &json)
        };
        assert_eq!(
            shadows("[[0.5, 1], [2], null, null]"),
            Ok(vec![
                Some(Val::F64s(vec![0.5, 1.0])),
                Some(Val::F32s(vec![2.0])),
                None,
                None
            ])
        );
        assert_eq!(
            shadows("[null, null, null, null]"),
            Ok(vec![None, None, None, None])
        );
        assert_eq!(
            shadows("[[1], null, null, null]"),
            Err(
                "--shadows: the shadow of argument 1 (%x: [f64]) must have 2 elements, as \
                 the argument has, found 1"
                    .into()
            )
        );
        assert_eq!(
            shadows("[[1, true], null, null, null]"),
            Err(
                "--shadows: the shadow of argument 1 (%x: [f64]), element 1, must be a number \
                 (or \"inf\", \"-inf\", \"nan\"), found true"
                    .into()
            )
        );
        assert_eq!(
            shadows("[null, 2.0, null, null]"),
            Err(
                "--shadows: the shadow of argument 2 (%y: mut [f32]) must be an array of f32 \
                 elements, found 2.0"
                    .into()
            )
        );
        assert_eq!(
            shadows("[null, null, null, []]"),
            Err(
                "--shadows: argument 4 (%c: [f64]) is `const`, so it has no shadow: give null \
                 (only `dup` and `dupnoneed` slices have shadows)"
                    .into()
            )
        );
        assert_eq!(
            shadows("[null, null, null]"),
            Err(
                "--shadows: @f has 4 parameters (%x: [f64], %y: mut [f32], %a: f64, %c: \
                 [f64]), so it takes one element (null or a shadow) per parameter, found 3"
                    .into()
            )
        );
    }

    #[test]
    fn results_print_as_run_prints_value() {
        assert_eq!(results_json(&[]), Value::Null);
        assert_eq!(render(&results_json(&[Val::F64(1.5)])), "1.5");
        assert_eq!(
            render(&results_json(&[Val::F64(1.0), Val::I64(2)])),
            "[1.0, 2]"
        );
    }
}
