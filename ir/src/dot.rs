//! Graphviz: the control-flow graphs of functions in the `dot` language.
//!
//! Each function becomes one `subgraph cluster_NAME` (a box around its blocks, with a
//! title), its blocks the nodes, its branches the edges. A node is a box whose label
//! is the block's name followed by its phis, instructions and terminator, one per
//! line, as the [printer](crate::write) writes them (left-justified, without
//! indentation); the entry block is drawn bold and a block that returns with a
//! double border. A `jump` is an unlabelled edge, a `br` two edges labelled `then`
//! and `else` (both drawn when both go to one block).
//!
//! [`function_to_dot`] prints one function as a whole `digraph`; [`write_dot`] puts
//! several functions, possibly of different modules, into one graph (what `gradlift
//! dump --stage dot` does with a function, its forward pass and its pullback).
//!
//! ```
//! use gradlift_ir::{dot::function_to_dot, parse};
//!
//! let module = parse("
//!     func @relu(%x: f64) -> f64 {
//!     entry:
//!         %pos = fcmp gt %x, 0.0
//!         br %pos, keep, zero
//!     keep:
//!         ret %x
//!     zero:
//!         ret 0.0
//!     }
//! ").unwrap();
//! let dot = function_to_dot(&module, module.func_by_name("relu").unwrap());
//! assert!(dot.starts_with("digraph \"relu\" {\n"));
//! assert!(dot.contains("subgraph cluster_relu {"));
//! assert!(dot.contains("c0_b0 -> c0_b1 [label=\"then\"];"));
//! assert!(dot.contains("c0_b0 -> c0_b2 [label=\"else\"];"));
//! // Each label line ends in `\l` (left-justified).
//! assert!(dot.contains(r#"entry:\l%pos = fcmp gt %x, 0.0\lbr %pos, keep, zero\l"#));
//! ```
//!
//! Text in labels and names is escaped for a dot string (`"` and `\` with a
//! backslash; a control character as the text `\u{..}`), so a message of `trap_if`
//! or any function name prints safely. Node IDs are `cK_bN` (cluster `K`, block
//! index `N`), so they are unique in a graph whatever the names are.
//!
//! Like the printer, this never panics: a block of a malformed function that is not
//! in the layout but is branched to is still declared (dashed, labelled
//! `<unplaced NAME>`), so every edge's ends are declared nodes, and a function
//! without a body is one node saying so.

use core::fmt::{self, Write as _};

use cranelift_entity::EntityRef;

use crate::entities::{Block, FuncId};
use crate::function::Terminator;
use crate::module::{Body, Module};
use crate::write::{Names, inst_line, phi_line, term_line};

/// One function of a graph, drawn as `subgraph cluster_NAME`.
#[derive(Copy, Clone, Debug)]
pub struct Cluster<'a> {
    /// The module the function belongs to.
    pub module: &'a Module,
    /// The function.
    pub func: FuncId,
    /// The name of the cluster: its ID is `cluster_` followed by it (quoted if it is
    /// not a plain identifier). Names should differ within one graph.
    pub name: &'a str,
    /// The title drawn on the cluster (escaped as needed).
    pub title: &'a str,
}

/// The control-flow graph of `func` as a whole `digraph`, with one cluster named
/// after the function and titled with its signature.
pub fn function_to_dot(module: &Module, func: FuncId) -> String {
    let name = module
        .funcs
        .get(func)
        .map_or_else(|| func.to_string(), |d| d.name.clone());
    let title = signature_title(module, func);
    let mut out = String::new();
    let cluster = Cluster {
        module,
        func,
        name: &name,
        title: &title,
    };
    // Writing to a `String` cannot fail.
    let _ = write_dot(&mut out, &name, &[cluster]);
    out
}

/// `@name(params) -> results`, the usual title of a function's cluster.
pub fn signature_title(module: &Module, func: FuncId) -> String {
    match module.funcs.get(func) {
        Some(d) => format!("@{}{}", d.name, d.sig),
        None => format!("<invalid {func}>"),
    }
}

/// Writes one `digraph` named `graph` with one cluster per element of `clusters`,
/// in order.
pub fn write_dot(w: &mut dyn fmt::Write, graph: &str, clusters: &[Cluster<'_>]) -> fmt::Result {
    writeln!(w, "digraph {} {{", quoted(graph))?;
    w.write_str("    node [shape=box, fontname=\"monospace\", fontsize=10];\n")?;
    w.write_str("    edge [fontname=\"monospace\", fontsize=9];\n")?;
    for (k, cluster) in clusters.iter().enumerate() {
        write_cluster(w, k, cluster)?;
    }
    w.write_str("}\n")
}

/// One `subgraph cluster_NAME { ... }`, its nodes named `c{k}_b{N}`.
fn write_cluster(w: &mut dyn fmt::Write, k: usize, cluster: &Cluster<'_>) -> fmt::Result {
    let module = cluster.module;
    writeln!(
        w,
        "    subgraph {} {{",
        id(&format!("cluster_{}", cluster.name))
    )?;
    writeln!(w, "        label={};", quoted(cluster.title))?;
    w.write_str("        labeljust=l;\n")?;
    let node = |b: Block| format!("c{k}_b{}", b.index());
    let func = match module.funcs.get(cluster.func).map(|d| &d.body) {
        Some(Body::Defined(func)) => func,
        Some(Body::Extern) => {
            return writeln!(
                w,
                "        c{k}_extern [label=\"extern: no body\", style=dashed];\n    }}"
            );
        }
        Some(Body::Declared) => {
            return writeln!(
                w,
                "        c{k}_declared [label=\"declared, not defined\", style=dashed];\n    }}"
            );
        }
        None => {
            return writeln!(
                w,
                "        c{k}_missing [label=\"no such function\", style=dashed];\n    }}"
            );
        }
    };
    let names = Names::new(func);
    let mut declared = vec![false; func.blocks.len()];
    for (i, &b) in func.layout.iter().enumerate() {
        let Some(data) = func.blocks.get(b) else {
            continue;
        };
        if std::mem::replace(&mut declared[b.index()], true) {
            continue; // A repeated layout entry: one node.
        }
        let mut label = format!("{}:\n", names.block(b));
        for phi in &data.phis {
            label.push_str(&phi_line(func, &names, phi));
            label.push('\n');
        }
        for &inst in &data.insts {
            label.push_str(&inst_line(module, func, &names, inst));
            label.push('\n');
        }
        match &data.term {
            Some(term) => label.push_str(&term_line(func, &names, term)),
            None => label.push_str("; no terminator"),
        }
        label.push('\n');
        let mut attrs = format!("label={}", left_justified(&label));
        if i == 0 {
            attrs.push_str(", style=bold");
        }
        if matches!(data.term, Some(Terminator::Ret(_))) {
            attrs.push_str(", peripheries=2");
        }
        writeln!(w, "        {} [{attrs}];", node(b))?;
    }
    // Edges, declaring any target that is not in the layout (a malformed function).
    let mut edges = String::new();
    for &b in &func.layout {
        let Some(term) = func.blocks.get(b).and_then(|d| d.term.as_ref()) else {
            continue;
        };
        let targets: Vec<(Block, Option<&str>)> = match *term {
            Terminator::Jump(t) => vec![(t, None)],
            Terminator::Br {
                then_dest,
                else_dest,
                ..
            } => vec![(then_dest, Some("then")), (else_dest, Some("else"))],
            Terminator::Ret(_) => Vec::new(),
        };
        for (t, label) in targets {
            let known = declared.get(t.index()).copied();
            if known != Some(true) {
                // The printer names such a block `<unplaced NAME>` (or `<invalid>`).
                writeln!(
                    w,
                    "        {} [label={}, style=dashed];",
                    node(t),
                    quoted(names.block(t))
                )?;
                if let Some(d) = declared.get_mut(t.index()) {
                    *d = true;
                }
            }
            match label {
                Some(l) => writeln!(edges, "        {} -> {} [label=\"{l}\"];", node(b), node(t))?,
                None => writeln!(edges, "        {} -> {};", node(b), node(t))?,
            }
        }
    }
    w.write_str(&edges)?;
    w.write_str("    }\n")
}

/// `s` as a dot ID: as is if it is a plain identifier, else quoted.
fn id(s: &str) -> String {
    let plain = s
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if plain { s.to_string() } else { quoted(s) }
}

/// `s` as a dot string: quoted, with `"` and `\` escaped, every newline a centred
/// line break (`\n`) and other control characters written out as `\u{..}`.
fn quoted(s: &str) -> String {
    escape(s, "\\n")
}

/// `s` as a dot string whose lines are left-justified: each newline becomes `\l`.
fn left_justified(s: &str) -> String {
    escape(s, "\\l")
}

fn escape(s: &str, newline: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str(newline),
            c if c.is_control() => {
                // Written as text: the backslash itself escaped.
                let _ = write!(out, "\\\\u{{{:x}}}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse;

    #[test]
    fn escapes_quotes_backslashes_and_controls() {
        assert_eq!(quoted("a\"b\\c"), r#""a\"b\\c""#);
        assert_eq!(left_justified("x\ny\n"), r#""x\ly\l""#);
        assert_eq!(quoted("t\u{1}"), r#""t\\u{1}""#);
        assert_eq!(id("cluster_f"), "cluster_f");
        assert_eq!(id("cluster_f.fwd"), r#""cluster_f.fwd""#);
        assert_eq!(id("9x"), r#""9x""#);
    }

    #[test]
    fn a_trap_message_is_escaped_in_its_label() {
        let module = parse(
            r#"func @f(%x: f64) -> f64 {
entry:
    %c = fcmp lt %x, 0.0
    trap_if %c, "say \"no\" \\ here"
    ret %x
}
"#,
        )
        .unwrap();
        let dot = function_to_dot(&module, module.func_by_name("f").unwrap());
        // The printer writes `"say \"no\" \\ here"`; dot needs each `\` and `"` escaped.
        assert!(
            dot.contains(r#"trap_if %c, \"say \\\"no\\\" \\\\ here\"\l"#),
            "{dot}"
        );
        // Every `"` that is not escaped opens or closes a string: an even count per line.
        for line in dot.lines() {
            let mut unescaped = 0;
            let mut chars = line.chars();
            while let Some(c) = chars.next() {
                match c {
                    '\\' => {
                        chars.next();
                    }
                    '"' => unescaped += 1,
                    _ => {}
                }
            }
            assert_eq!(unescaped % 2, 0, "{line}");
        }
    }

    #[test]
    fn branches_to_one_block_draw_two_edges_and_loops_draw_back_edges() {
        let module = parse(
            "func @f(%c: bool, %n: i64) -> i64 {
entry:
    br %c, head, head
head:
    %i = phi i64 [entry: 0, head: %i1]
    %i1 = iadd %i, 1
    %more = icmp lt %i1, %n
    br %more, head, exit
exit:
    ret %i1
}
",
        )
        .unwrap();
        let dot = function_to_dot(&module, module.func_by_name("f").unwrap());
        assert!(dot.contains("c0_b0 -> c0_b1 [label=\"then\"];"), "{dot}");
        assert!(dot.contains("c0_b0 -> c0_b1 [label=\"else\"];"), "{dot}");
        assert!(dot.contains("c0_b1 -> c0_b1 [label=\"then\"];"), "{dot}");
        assert!(dot.contains("c0_b2 [label=\"exit:\\lret %i1\\l\", peripheries=2];"));
        assert!(dot.contains("c0_b0 [label=\"entry:\\lbr %c, head, head\\l\", style=bold];"));
    }

    #[test]
    fn a_branch_out_of_the_layout_still_declares_its_target() {
        let mut module = parse("func @f() {\nentry:\n    ret\n}\n").unwrap();
        let f = module.func_by_name("f").unwrap();
        let Body::Defined(func) = &mut module.funcs[f].body else {
            panic!("defined")
        };
        let stray = func.make_block(Some("stray"));
        let entry = func.layout[0];
        func.set_terminator(entry, Terminator::Jump(stray));
        let dot = function_to_dot(&module, f);
        assert!(
            dot.contains("c0_b1 [label=\"<unplaced stray>\", style=dashed];"),
            "{dot}"
        );
        assert!(dot.contains("c0_b0 -> c0_b1;"), "{dot}");
    }

    #[test]
    fn externs_and_several_clusters() {
        let module =
            parse("extern @h(f64) -> f64\nfunc @g(%x: f64) -> f64 {\nentry:\n    ret %x\n}\n")
                .unwrap();
        let (h, g) = (
            module.func_by_name("h").unwrap(),
            module.func_by_name("g").unwrap(),
        );
        let mut dot = String::new();
        write_dot(
            &mut dot,
            "both",
            &[
                Cluster {
                    module: &module,
                    func: g,
                    name: "primal",
                    title: "g",
                },
                Cluster {
                    module: &module,
                    func: h,
                    name: "host",
                    title: "h",
                },
            ],
        )
        .unwrap();
        assert!(dot.contains("subgraph cluster_primal {"), "{dot}");
        assert!(dot.contains("subgraph cluster_host {"), "{dot}");
        assert!(dot.contains("c1_extern [label=\"extern: no body\", style=dashed];"));
        assert!(dot.contains("c0_b0 [label=\"entry:\\lret %x\\l\""), "{dot}");
        assert_eq!(dot.matches('{').count(), dot.matches('}').count());
    }
}
