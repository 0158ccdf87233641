//! Malformed IR texts, each with the error it must produce and where.
//!
//! One line per case: the text, the expected `line:col` of the first error, and a
//! fragment of its message. The first error is the parser's if parsing fails,
//! otherwise the verifier's. Cases cover lexical errors, grammar errors, unknown names,
//! literal typing, type errors, phi/predecessor mismatches, dominance, and the rules
//! about slices.

use gradlift_ir::{parse, verify};

/// Parses and verifies `text`, and checks that the first error is at `pos`
/// (`"line:col"`) and that its message contains `fragment`.
#[track_caller]
fn check(text: &str, pos: &str, fragment: &str) {
    let (got_pos, message) = match parse(text) {
        Err(errs) => {
            let e = &errs.0[0];
            (e.pos.to_string(), e.message.clone())
        }
        Ok(module) => match verify(&module) {
            Err(errs) => {
                let e = &errs.0[0];
                (e.pos.to_string(), e.to_string())
            }
            Ok(()) => panic!("expected an error at {pos} ({fragment}), but the text is valid"),
        },
    };
    assert_eq!(got_pos, pos, "wrong position for `{fragment}`: {message}");
    assert!(
        message.contains(fragment),
        "expected `{fragment}` in the message at {pos}, got: {message}"
    );
}

// Lexical.

#[test]
fn stray_character() {
    check(
        "func @f() {\nentry:\n    ret $\n}\n",
        "3:9",
        "unexpected character",
    );
}

#[test]
fn malformed_exponent() {
    check(
        "func @f() -> f64 {\nentry:\n    ret 1.0e\n}\n",
        "3:9",
        "1.0e",
    );
}

#[test]
fn hex_literal_too_large() {
    check(
        "func @f() -> i64 {\nentry:\n    ret 0x1FFFFFFFFFFFFFFFF\n}\n",
        "3:9",
        "0x1FFFFFFFFFFFFFFFF",
    );
}

#[test]
fn sigil_without_name() {
    check("func @f(%: f64) {\nentry:\n    ret\n}\n", "1:9", "%");
}

// Grammar.

#[test]
fn missing_return_type() {
    check(
        "func @f() -> {\nentry:\n    ret\n}\n",
        "1:14",
        "expected a type",
    );
}

#[test]
fn missing_comma_between_operands() {
    check(
        "func @f(%x: f64) -> f64 {\nentry:\n    %r = fadd %x %x\n    ret %r\n}\n",
        "3:18",
        "expected `,`",
    );
}

#[test]
fn unknown_op() {
    check(
        "func @f(%x: f64) -> f64 {\nentry:\n    %r = fadd2 %x, %x\n    ret %r\n}\n",
        "3:10",
        "fadd2",
    );
}

#[test]
fn unknown_type() {
    check("func @f(%x: f16) {\nentry:\n    ret\n}\n", "1:13", "f16");
}

#[test]
fn unknown_predicate() {
    check(
        "func @f(%x: f64) -> bool {\nentry:\n    %c = fcmp lte %x, %x\n    ret %c\n}\n",
        "3:15",
        "lte",
    );
}

#[test]
fn block_without_terminator() {
    check(
        "func @f(%x: f64) -> f64 {\nentry:\n    %y = fneg %x\nnext:\n    ret %y\n}\n",
        "4:1",
        "terminator",
    );
}

#[test]
fn phi_after_an_instruction() {
    check(
        "func @f(%x: f64) -> f64 {\nentry:\n    jump b\nb:\n    %y = fneg %x\n    %p = phi f64 [entry: %x]\n    ret %p\n}\n",
        "6:10",
        "phi",
    );
}

// Unknown and duplicate names.

#[test]
fn unknown_value() {
    check(
        "func @f(%x: f64) -> f64 {\nentry:\n    %r = fadd %x, %acc2\n    ret %r\n}\n",
        "3:19",
        "unknown value %acc2",
    );
}

#[test]
fn unknown_block() {
    check(
        "func @f() {\nentry:\n    jump nowhere\n}\n",
        "3:10",
        "nowhere",
    );
}

#[test]
fn unknown_function() {
    check(
        "func @f(%x: f64) -> f64 {\nentry:\n    %r = call @g(%x)\n    ret %r\n}\n",
        "3:15",
        "@g",
    );
}

#[test]
fn value_defined_twice() {
    check(
        "func @f(%x: f64) -> f64 {\nentry:\n    %y = fneg %x\n    %y = fabs %x\n    ret %y\n}\n",
        "4:5",
        "%y",
    );
}

#[test]
fn block_label_defined_twice() {
    check(
        "func @f() {\nentry:\n    jump b\nb:\n    jump b\nb:\n    ret\n}\n",
        "6:1",
        "b",
    );
}

#[test]
fn function_defined_twice() {
    check(
        "func @f() {\nentry:\n    ret\n}\nfunc @f() {\nentry:\n    ret\n}\n",
        "5:6",
        "@f",
    );
}

// Literal typing from context.

#[test]
fn float_literal_where_an_integer_is_expected() {
    check(
        "func @f(%n: i64) -> i64 {\nentry:\n    %m = iadd %n, 1.5\n    ret %m\n}\n",
        "3:19",
        "1.5",
    );
}

// Types.

#[test]
fn integer_operand_to_a_float_op() {
    check(
        "func @f(%x: f64, %n: i64) -> f64 {\nentry:\n    %r = fadd %x, %n\n    ret %r\n}\n",
        "3:5",
        "fadd",
    );
}

#[test]
fn return_of_the_wrong_type() {
    check(
        "func @f(%n: i64) -> f64 {\nentry:\n    ret %n\n}\n",
        "3:5",
        "i64",
    );
}

#[test]
fn return_of_the_wrong_count() {
    check(
        "func @f(%x: f64) -> (f64, f64) {\nentry:\n    ret %x\n}\n",
        "3:5",
        "ret",
    );
}

#[test]
fn branch_on_a_float() {
    check(
        "func @f(%x: f64) {\nentry:\n    br %x, a, b\na:\n    ret\nb:\n    ret\n}\n",
        "3:5",
        "bool",
    );
}

#[test]
fn load_with_a_float_index() {
    check(
        "func @f(%s: [f64], %x: f64) -> f64 {\nentry:\n    %r = load %s[%x]\n    ret %r\n}\n",
        "3:5",
        "i64",
    );
}

#[test]
fn call_with_too_many_arguments() {
    check(
        "func @g(%x: f64) -> f64 {\nentry:\n    ret %x\n}\nfunc @f(%x: f64) -> f64 {\nentry:\n    %r = call @g(%x, %x)\n    ret %r\n}\n",
        "7:5",
        "argument",
    );
}

#[test]
fn call_with_an_argument_of_the_wrong_type() {
    check(
        "func @f(%n: i64) -> f64 {\nentry:\n    %r = call @g(%n)\n    ret %r\n}\nfunc @g(%x: f64) -> f64 {\nentry:\n    ret %x\n}\n",
        "3:5",
        "f64",
    );
}

#[test]
fn store_into_a_read_only_slice() {
    check(
        "func @f(%s: [f64]) {\nentry:\n    store %s[0], 1.0\n    ret\n}\n",
        "3:5",
        "read-only",
    );
}

#[test]
fn alloc_returned() {
    check(
        "func @f() -> mut [f64] {\nentry:\n    %a = alloc f64, 3\n    ret %a\n}\n",
        "4:5",
        "alloc",
    );
}

#[test]
fn alloc_returned_through_a_phi() {
    check(
        "func @f(%s: mut [f64], %c: bool) -> mut [f64] {\nentry:\n    %a = alloc f64, 3\n    br %c, l, r\nl:\n    jump j\nr:\n    jump j\nj:\n    %p = phi mut [f64] [l: %a, r: %s]\n    ret %p\n}\n",
        "11:5",
        "alloc",
    );
}

// The tape.

#[test]
fn push_of_a_slice() {
    check(
        "func @f(%s: [f64]) {\nentry:\n    push %s\n    ret\n}\n",
        "3:5",
        "push takes a scalar, found [f64]",
    );
}

#[test]
fn pop_of_a_slice_type() {
    check(
        "func @f() {\nentry:\n    %s = pop [f64]\n    ret\n}\n",
        "3:5",
        "pop takes a scalar type, not [f64]",
    );
}

#[test]
fn tape_alloc_of_bools() {
    check(
        "func @f() {\nentry:\n    %a = tape_alloc bool, 3\n    ret\n}\n",
        "3:5",
        "tape_alloc makes buffers of f64, f32 or i64, not bool",
    );
}

#[test]
fn tape_alloc_of_a_float_length() {
    check(
        "func @f(%x: f64) {\nentry:\n    %h = tape_alloc f64, %x\n    ret\n}\n",
        "3:5",
        "operand 1 of tape_alloc must be i64, found f64",
    );
}

#[test]
fn tape_view_of_bools() {
    check(
        "func @f(%h: i64) {\nentry:\n    %a = tape_view bool, %h\n    ret\n}\n",
        "3:5",
        "tape_view views buffers of f64, f32 or i64, not bool",
    );
}

#[test]
fn tape_view_of_a_float() {
    check(
        "func @f(%x: f64) {\nentry:\n    %a = tape_view f64, %x\n    ret\n}\n",
        "3:5",
        "operand 1 of tape_view must be i64, found f64",
    );
}

#[test]
fn tape_view_of_a_slice() {
    check(
        "func @f(%s: mut [f64]) {\nentry:\n    %a = tape_view f64, %s\n    ret\n}\n",
        "3:5",
        "operand 1 of tape_view must be i64, found mut [f64]",
    );
}

#[test]
fn tape_view_of_a_float_literal() {
    check(
        "func @f() {\nentry:\n    %a = tape_view f64, 1.5\n    ret\n}\n",
        "3:25",
        "1.5",
    );
}

#[test]
fn tape_view_without_a_handle() {
    check(
        "func @f() {\nentry:\n    %a = tape_view f64\n    ret\n}\n",
        "4:5",
        "expected `,`, found `ret`",
    );
}

#[test]
fn push_with_a_result() {
    check(
        "func @f(%x: f64) {\nentry:\n    %y = push %x\n    ret\n}\n",
        "3:5",
        "push has no results but 1 name is given",
    );
}

#[test]
fn pop_without_a_type() {
    check(
        "func @f() -> f64 {\nentry:\n    %x = pop\n    ret %x\n}\n",
        "4:5",
        "unknown type `ret`",
    );
}

#[test]
fn tape_view_returned() {
    check(
        "func @f(%h: i64) -> mut [f64] {\nentry:\n    %a = tape_view f64, %h\n    ret %a\n}\n",
        "4:5",
        "cannot return %a: a tape_view slice views a tape buffer and is valid only during the gradient call",
    );
}

#[test]
fn tape_view_returned_through_a_phi() {
    check(
        "func @f(%s: mut [f64], %h: i64, %c: bool) -> [f64] {\nentry:\n    %a = tape_view f64, %h\n    br %c, l, r\nl:\n    jump j\nr:\n    jump j\nj:\n    %p = phi mut [f64] [l: %a, r: %s]\n    ret %p\n}\n",
        "11:5",
        "cannot return %p: it may be the tape_view slice %a, which views a tape buffer",
    );
}

#[test]
fn tape_view_returned_through_a_select() {
    check(
        "func @f(%s: mut [f64], %c: bool) -> [f64] {\nentry:\n    %h = tape_alloc f64, 3\n    %a = tape_view f64, %h\n    %r = select %c, %s, %a\n    ret %r\n}\n",
        "6:5",
        "it may be the tape_view slice %a, which views a tape buffer",
    );
}

// Debug checks: `trap_if` and string literals.

#[test]
fn unterminated_string() {
    check(
        "func @f(%c: bool) {\nentry:\n    trap_if %c, \"oops\n    ret\n}\n",
        "3:17",
        "unterminated string literal",
    );
}

#[test]
fn unterminated_string_at_the_end_of_the_text() {
    check(
        "func @f(%c: bool) {\nentry:\n    trap_if %c, \"oops",
        "3:17",
        "unterminated string literal",
    );
}

#[test]
fn bad_escape_in_a_string() {
    check(
        "func @f(%c: bool) {\nentry:\n    trap_if %c, \"a\\qb\"\n    ret\n}\n",
        "3:19",
        "invalid escape `\\q` in a string literal",
    );
}

#[test]
fn escape_of_no_unicode_character() {
    check(
        "func @f(%c: bool) {\nentry:\n    trap_if %c, \"ok \\u{d800}\"\n    ret\n}\n",
        "3:21",
        "invalid escape `\\u{d800}` in a string literal: not a Unicode scalar value",
    );
}

#[test]
fn raw_control_character_in_a_string() {
    check(
        "func @f(%c: bool) {\nentry:\n    trap_if %c, \"a\tb\"\n    ret\n}\n",
        "3:19",
        "raw control character U+0009 in a string literal: write it as `\\t`",
    );
}

#[test]
fn trap_if_without_a_message() {
    check(
        "func @f(%c: bool) {\nentry:\n    trap_if %c\n    ret\n}\n",
        "4:5",
        "expected `,`, found `ret`",
    );
}

#[test]
fn trap_if_with_a_name_for_a_message() {
    check(
        "func @f(%c: bool) {\nentry:\n    trap_if %c, msg\n    ret\n}\n",
        "3:17",
        "expected a message (a string literal `\"...\"`), found `msg`",
    );
}

#[test]
fn string_where_an_operand_is_expected() {
    check(
        "func @f(%x: f64) -> f64 {\nentry:\n    %y = fneg \"x\"\n    ret %y\n}\n",
        "3:15",
        "expected an operand (`%name` or a literal), found `\"x\"`",
    );
}

#[test]
fn trap_if_on_a_float() {
    check(
        "func @f(%x: f64) {\nentry:\n    trap_if %x, \"x\"\n    ret\n}\n",
        "3:5",
        "operand 1 of trap_if must be bool, found f64",
    );
}

#[test]
fn trap_if_on_an_integer_literal() {
    check(
        "func @f() {\nentry:\n    trap_if 1, \"x\"\n    ret\n}\n",
        "3:13",
        "integer literal 1 where bool is expected",
    );
}

#[test]
fn trap_if_with_a_result() {
    check(
        "func @f(%c: bool) {\nentry:\n    %r = trap_if %c, \"x\"\n    ret\n}\n",
        "3:5",
        "trap_if has no results but 1 name is given",
    );
}

// Phis and predecessors.

#[test]
fn phi_missing_an_edge() {
    check(
        "func @f(%c: bool) -> f64 {\nentry:\n    br %c, l, j\nl:\n    jump j\nj:\n    %p = phi f64 [l: 1.0]\n    ret %p\n}\n",
        "7:5",
        "entry",
    );
}

#[test]
fn phi_edge_from_a_non_predecessor() {
    check(
        "func @f() -> f64 {\nentry:\n    jump j\nother:\n    ret 0.0\nj:\n    %p = phi f64 [entry: 1.0, other: 2.0]\n    ret %p\n}\n",
        "7:5",
        "other",
    );
}

#[test]
fn entry_block_with_a_predecessor() {
    check(
        "func @f() {\nentry:\n    jump b\nb:\n    jump entry\n}\n",
        "2:1",
        "entry",
    );
}

// Dominance.

#[test]
fn use_before_definition_in_one_block() {
    check(
        "func @f(%x: f64) -> f64 {\nentry:\n    %a = fadd %b, %x\n    %b = fneg %x\n    ret %a\n}\n",
        "3:5",
        "%b",
    );
}

#[test]
fn use_of_a_value_from_a_sibling_branch() {
    check(
        "func @f(%x: f64, %c: bool) -> f64 {\nentry:\n    br %c, l, r\nl:\n    %y = fneg %x\n    jump j\nr:\n    jump j\nj:\n    ret %y\n}\n",
        "10:5",
        "%y",
    );
}

// Declarations.

#[test]
fn vjp_with_the_wrong_signature() {
    check(
        "func @f(%x: f64) -> f64 {\nentry:\n    ret %x\n}\nfunc @df(%x: f64) -> f64 {\nentry:\n    ret %x\n}\nvjp @f = @df\n",
        "9:1",
        "vjp",
    );
}

#[test]
fn jvp_with_the_wrong_signature() {
    check(
        "func @f(%x: f64) -> f64 {\nentry:\n    ret %x\n}\nfunc @df(%x: f64, %dy: f64) -> (f64, f64) {\nentry:\n    ret %x, %dy\n}\njvp @f = @df\n",
        "9:1",
        "jvp rule @df for @f must have the signature (f64, f64) -> f64, found (f64, f64) -> (f64, f64)",
    );
}

#[test]
fn jvp_without_its_rule() {
    check(
        "extern @f(f64) -> f64\njvp @f\n",
        "3:1",
        "expected `=`, found end of input",
    );
    check(
        "extern @f(f64) -> f64\nextern @r(f64, f64) -> f64\njvp @f @r\n",
        "3:8",
        "expected `=`, found `@r`",
    );
    check(
        "extern @f(f64) -> f64\njvp @f =\nnodiff @f\n",
        "3:1",
        "expected a function name (`@name`), found `nodiff`",
    );
}

#[test]
fn jvp_of_an_unknown_function() {
    check(
        "extern @r(f64, f64) -> f64\njvp @f = @r\n",
        "2:5",
        "unknown function @f",
    );
    check(
        "extern @f(f64) -> f64\njvp @f = @r\n",
        "2:10",
        "unknown function @r",
    );
}
