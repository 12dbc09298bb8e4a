//! The crate's layering, checked from its source: the import graph of the top-level modules
//! of src/ (from `crate::` paths, and `super::` paths that climb to the crate root) has no
//! cycle, and no core module imports a feature module. The two lists are DESIGN.md's, section
//! "Layers" (its ```layers block): this test reads them there, so the document and the check
//! cannot drift apart, and a module missing from both lists fails too.
//!
//! What counts as an import: every `crate::a::..` path and every item of a `crate::{a, b::c}`
//! group, outside comments, string literals and `#[cfg(test)]` modules (test code may reach
//! anywhere); a root-level name (`crate::LocalCache`, `crate::brand!`) counts as the module
//! that defines it (lib.rs's `pub use`, or the file of the `macro_rules!`). Files named
//! `tests.rs` are unit tests and are skipped.
//!
//! And where the `unsafe` is: the blocks of every top-level module outside the core and the
//! FFI modules (DESIGN.md's ```unsafe block) match DESIGN.md's table, at most 5 in all.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A fenced block of DESIGN.md (```name): each line `kind: module module ...`, as a map from
/// kind to modules; every kind must be one of `kinds`.
fn design_block(name: &str, kinds: &[&str]) -> BTreeMap<String, BTreeSet<String>> {
    let text = std::fs::read_to_string(root().join("DESIGN.md")).expect("DESIGN.md");
    let block = text
        .split(&format!("```{name}\n"))
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .unwrap_or_else(|| panic!("DESIGN.md has a ```{name} block"));
    let mut sets: BTreeMap<String, BTreeSet<String>> = kinds
        .iter()
        .map(|k| (k.to_string(), BTreeSet::new()))
        .collect();
    for line in block.lines() {
        let Some((kind, mods)) = line.split_once(':') else {
            continue;
        };
        let set = sets
            .get_mut(kind.trim())
            .unwrap_or_else(|| panic!("DESIGN.md {name} block: unknown kind {kind:?}"));
        set.extend(mods.split_whitespace().map(str::to_string));
    }
    sets
}

/// DESIGN.md's lists: (core, features).
fn design_layers() -> (BTreeSet<String>, BTreeSet<String>) {
    let mut b = design_block("layers", &["core", "features"]);
    (b.remove("core").unwrap(), b.remove("features").unwrap())
}

/// Removes comments, string and char literals (replaced by spaces, keeping line structure).
fn strip(src: &str) -> String {
    let c: Vec<char> = src.chars().collect();
    let mut out = String::with_capacity(src.len());
    let mut i = 0;
    while i < c.len() {
        if c[i] == '/' && c.get(i + 1) == Some(&'/') {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else if c[i] == '/' && c.get(i + 1) == Some(&'*') {
            let mut depth = 0;
            while i < c.len() {
                if c[i] == '/' && c.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if c[i] == '*' && c.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
            out.push(' ');
        } else if c[i] == 'r'
            && (c.get(i + 1) == Some(&'"') || c.get(i + 1) == Some(&'#'))
            && (i == 0 || !(c[i - 1].is_alphanumeric() || c[i - 1] == '_'))
        {
            // Raw string r"..", r#".."#.
            let mut j = i + 1;
            let mut hashes = 0;
            while c.get(j) == Some(&'#') {
                hashes += 1;
                j += 1;
            }
            if c.get(j) != Some(&'"') {
                out.push(c[i]);
                i += 1;
                continue;
            }
            j += 1;
            loop {
                if j >= c.len() {
                    break;
                }
                if c[j] == '"' && (0..hashes).all(|k| c.get(j + 1 + k) == Some(&'#')) {
                    j += 1 + hashes;
                    break;
                }
                j += 1;
            }
            out.push_str("\"\"");
            i = j;
        } else if c[i] == '"' {
            i += 1;
            while i < c.len() && c[i] != '"' {
                if c[i] == '\\' {
                    i += 1;
                }
                i += 1;
            }
            i += 1;
            out.push_str("\"\"");
        } else if c[i] == '\'' {
            // A char literal ('x', '\n', '\u{..}'), or a lifetime ('a), left as it is.
            if c.get(i + 1) == Some(&'\\') {
                i += 2;
                while i < c.len() && c[i] != '\'' {
                    i += 1;
                }
                i += 1;
                out.push_str("' '");
            } else if c.get(i + 2) == Some(&'\'') {
                i += 3;
                out.push_str("' '");
            } else {
                out.push('\'');
                i += 1;
            }
        } else {
            out.push(c[i]);
            i += 1;
        }
    }
    out
}

fn is_ident(ch: char) -> bool {
    ch.is_alphanumeric() || ch == '_'
}

fn ident_at(c: &[char], mut i: usize) -> (String, usize) {
    let mut s = String::new();
    while i < c.len() && is_ident(c[i]) {
        s.push(c[i]);
        i += 1;
    }
    (s, i)
}

fn skip_ws(c: &[char], mut i: usize) -> usize {
    while i < c.len() && c[i].is_whitespace() {
        i += 1;
    }
    i
}

/// The index after the brace group that starts at `c[open] == '{'`.
fn after_group(c: &[char], open: usize) -> usize {
    let mut depth = 0;
    let mut i = open;
    while i < c.len() {
        match c[i] {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return i + 1;
                }
            }
            _ => {}
        }
        i += 1;
    }
    c.len()
}

/// First path segments of the items of the group at `c[open] == '{'` (`{a, b::c, D}`).
fn group_heads(c: &[char], open: usize) -> Vec<String> {
    let end = after_group(c, open);
    let mut heads = Vec::new();
    let mut depth = 0;
    let mut expect_head = true;
    let mut i = open + 1;
    while i < end - 1 {
        match c[i] {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => expect_head = true,
            ch if depth == 0 && expect_head && is_ident(ch) => {
                let (id, j) = ident_at(c, i);
                heads.push(id);
                expect_head = false;
                i = j;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    heads
}

/// The names a file reaches at the crate root, with the file's own module path (`pool`,
/// `pool::adapters`) for resolving `super::`.
fn root_names(text: &str, file_path: &[String]) -> BTreeSet<String> {
    let c: Vec<char> = text.chars().collect();
    let mut names = BTreeSet::new();
    // Inline modules: (name, brace depth at which their body ends).
    let mut inline: Vec<(String, usize)> = Vec::new();
    let mut depth = 0usize;
    let mut cfg_test_pending = false;
    let mut i = 0;
    while i < c.len() {
        let ch = c[i];
        if ch == '{' {
            depth += 1;
            i += 1;
            continue;
        }
        if ch == '}' {
            depth = depth.saturating_sub(1);
            while inline.last().is_some_and(|(_, d)| *d > depth) {
                inline.pop();
            }
            i += 1;
            continue;
        }
        if ch == '#' && c.get(i + 1) == Some(&'[') {
            // An attribute: `#[cfg(..test..)]` marks the next item as test code.
            let mut j = i + 2;
            let mut d = 1;
            let mut attr = String::new();
            while j < c.len() && d > 0 {
                match c[j] {
                    '[' => d += 1,
                    ']' => d -= 1,
                    _ => {}
                }
                attr.push(c[j]);
                j += 1;
            }
            let words: Vec<&str> = attr
                .split(|ch: char| !is_ident(ch))
                .filter(|w| !w.is_empty())
                .collect();
            if words.first() == Some(&"cfg") && words.contains(&"test") && !words.contains(&"not") {
                cfg_test_pending = true;
            }
            i = j;
            continue;
        }
        if is_ident(ch) && (i == 0 || !(is_ident(c[i - 1]) || c[i - 1] == '$')) {
            let (id, j) = ident_at(&c, i);
            if id == "mod" {
                let k = skip_ws(&c, j);
                let (name, k2) = ident_at(&c, k);
                let k3 = skip_ws(&c, k2);
                if c.get(k3) == Some(&'{') {
                    if cfg_test_pending {
                        i = after_group(&c, k3); // test code may reach anywhere
                        cfg_test_pending = false;
                        continue;
                    }
                    depth += 1;
                    inline.push((name, depth));
                    i = k3 + 1;
                    continue;
                }
            }
            if id == "fn" || id == "use" || id == "impl" || id == "struct" || id == "mod" {
                cfg_test_pending = false;
            }
            // `crate::` or `super::super::..`
            let mut climb: Option<usize> = None;
            let mut k = j;
            if id == "crate" && c.get(j) == Some(&':') && c.get(j + 1) == Some(&':') {
                climb = Some(usize::MAX);
                k = j + 2;
            } else if id == "super" {
                let mut n = 0;
                let mut p = i;
                loop {
                    let (seg, q) = ident_at(&c, p);
                    if seg == "super" && c.get(q) == Some(&':') && c.get(q + 1) == Some(&':') {
                        n += 1;
                        p = q + 2;
                    } else {
                        break;
                    }
                }
                if n > 0 {
                    climb = Some(n);
                    k = p;
                }
            }
            if let Some(n) = climb {
                let here = file_path.len() + inline.len();
                let reaches_root = n == usize::MAX || n >= here;
                if reaches_root {
                    let k = skip_ws(&c, k);
                    if c.get(k) == Some(&'{') {
                        names.extend(group_heads(&c, k));
                        i = after_group(&c, k);
                        continue;
                    }
                    let (seg, _) = ident_at(&c, k);
                    if !seg.is_empty() {
                        names.insert(seg);
                    }
                }
                i = k;
                continue;
            }
            i = j;
            continue;
        }
        i += 1;
    }
    names
}

fn rs_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).expect("read src") {
        let p = e.expect("entry").path();
        if p.is_dir() {
            rs_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The module path of a file: src/pool/mod.rs -> [pool], src/pool/table.rs ->
/// [pool, table], src/lib.rs -> [].
fn module_path(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).expect("under src");
    let mut parts: Vec<String> = rel
        .iter()
        .map(|s| s.to_string_lossy().trim_end_matches(".rs").to_string())
        .collect();
    if matches!(parts.last().map(String::as_str), Some("mod" | "lib")) {
        parts.pop();
    }
    parts
}

/// The import graph of the top-level modules: module -> modules it imports.
fn import_graph() -> BTreeMap<String, BTreeSet<String>> {
    let src = root().join("src");
    let mut files = Vec::new();
    rs_files(&src, &mut files);
    let mods: BTreeSet<String> = files
        .iter()
        .map(|f| module_path(&src, f))
        .filter_map(|p| p.first().cloned())
        .collect();
    // Root-level names -> defining module: lib.rs's `pub use m::..` and exported macros.
    let mut owner: BTreeMap<String, String> = BTreeMap::new();
    let lib = strip(&std::fs::read_to_string(src.join("lib.rs")).expect("lib.rs"));
    for stmt in lib.split(';') {
        let Some(rest) = stmt.trim().strip_prefix("pub use ") else {
            continue;
        };
        let rest = rest.trim();
        let Some((m, items)) = rest.split_once("::") else {
            continue;
        };
        let items = items.trim().trim_start_matches('{').trim_end_matches('}');
        for item in items.split(',') {
            let name = item.trim().rsplit("::").next().unwrap_or("").trim();
            let name = name.rsplit(" as ").next().unwrap_or(name).trim();
            if !name.is_empty() {
                owner.insert(name.to_string(), m.trim().to_string());
            }
        }
    }
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let texts: Vec<(PathBuf, String)> = files
        .iter()
        .map(|f| (f.clone(), strip(&std::fs::read_to_string(f).expect("read"))))
        .collect();
    for (f, text) in &texts {
        let path = module_path(&src, f);
        let Some(m) = path.first() else { continue };
        if let Some(pos) = text.find("macro_rules!") {
            let (name, _) = ident_at(
                &text[pos + 12..].trim_start().chars().collect::<Vec<_>>(),
                0,
            );
            owner.insert(name, m.clone());
        }
    }
    for (f, text) in &texts {
        let path = module_path(&src, f);
        let Some(m) = path.first().cloned() else {
            continue; // lib.rs: the root declares and re-exports, it is no layer
        };
        if f.file_name().is_some_and(|n| n == "tests.rs") {
            continue;
        }
        let entry = graph.entry(m.clone()).or_default();
        for name in root_names(text, &path) {
            let target = if mods.contains(&name) {
                Some(name.clone())
            } else {
                owner.get(&name).cloned()
            };
            if let Some(t) = target {
                if t != m {
                    entry.insert(t);
                }
            }
        }
    }
    for m in mods {
        graph.entry(m).or_default();
    }
    graph
}

/// Strongly connected components of more than one module (Tarjan).
fn cycles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct St<'a> {
        g: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on: BTreeSet<&'a str>,
        out: Vec<Vec<String>>,
    }
    fn visit<'a>(s: &mut St<'a>, v: &'a str) {
        let n = s.index.len();
        s.index.insert(v, n);
        s.low.insert(v, n);
        s.stack.push(v);
        s.on.insert(v);
        for w in s.g.get(v).into_iter().flatten() {
            let w = w.as_str();
            if !s.index.contains_key(w) {
                visit(s, w);
                let lw = s.low[w];
                let lv = s.low.get_mut(v).unwrap();
                *lv = (*lv).min(lw);
            } else if s.on.contains(w) {
                let iw = s.index[w];
                let lv = s.low.get_mut(v).unwrap();
                *lv = (*lv).min(iw);
            }
        }
        if s.low[v] == s.index[v] {
            let mut comp = Vec::new();
            loop {
                let w = s.stack.pop().unwrap();
                s.on.remove(w);
                comp.push(w.to_string());
                if w == v {
                    break;
                }
            }
            if comp.len() > 1 {
                comp.sort();
                s.out.push(comp);
            }
        }
    }
    let mut s = St {
        g: graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in graph.keys() {
        if !s.index.contains_key(v.as_str()) {
            visit(&mut s, v);
        }
    }
    s.out
}

#[test]
fn every_module_is_in_one_layer_of_design_md() {
    let (core, features) = design_layers();
    let graph = import_graph();
    let both: Vec<_> = core.intersection(&features).collect();
    assert!(both.is_empty(), "in both lists of DESIGN.md: {both:?}");
    let unlisted: Vec<_> = graph
        .keys()
        .filter(|m| !core.contains(*m) && !features.contains(*m))
        .collect();
    assert!(
        unlisted.is_empty(),
        "modules missing from DESIGN.md's layers: {unlisted:?}"
    );
    let gone: Vec<_> = core
        .iter()
        .chain(&features)
        .filter(|m| !graph.contains_key(*m))
        .collect();
    assert!(
        gone.is_empty(),
        "DESIGN.md lists modules that do not exist: {gone:?}"
    );
}

#[test]
fn no_core_module_imports_a_feature_module() {
    let (core, features) = design_layers();
    let graph = import_graph();
    let bad: Vec<String> = graph
        .iter()
        .filter(|(m, _)| core.contains(*m))
        .flat_map(|(m, ts)| {
            ts.iter()
                .filter(|t| features.contains(*t))
                .map(move |t| format!("{m} -> {t}"))
        })
        .collect();
    assert!(bad.is_empty(), "core modules importing features: {bad:#?}");
}

#[test]
fn the_top_level_modules_import_no_cycle() {
    let graph = import_graph();
    let found = cycles(&graph);
    assert!(
        found.is_empty(),
        "import cycles among top-level modules: {found:?}"
    );
}

#[test]
fn fork_imports_nothing_of_the_crate() {
    // The lowest layer: the modules that hold locks register with it.
    let graph = import_graph();
    assert_eq!(graph["fork"], BTreeSet::new(), "fork imports");
}

#[test]
fn the_reader_sees_what_it_must() {
    // The scanner itself, on code shaped as the crate writes it, so that a parsing slip cannot
    // pass the checks above vacuously.
    let text = strip(
        "use crate::{a::{B, C}, d};\n// crate::commented\nfn f() { let s = \"crate::in_string\"; \
         crate::e::f(); super::g(); }\nmod inner { use super::h; }\n\
         #[cfg(test)]\nmod tests { use crate::only_tests; }\nconst C: char = '\"'; crate::k!();",
    );
    let top = root_names(&text, &["x".to_string()]);
    let want: BTreeSet<String> = ["a", "d", "e", "g", "k"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    assert_eq!(top, want);
    let deep = root_names(
        "use super::super::m; use super::n;",
        &["x".into(), "y".into()],
    );
    assert_eq!(deep, ["m".to_string()].into_iter().collect());
    // And on the crate: the modules everything stands on are seen as imported.
    let graph = import_graph();
    assert!(graph["pool"].contains("ring") && graph["pool"].contains("cache"));
    assert!(graph["builder"].contains("pool"));
}

/// DESIGN.md's ```unsafe block (the modules whose unsafe code is not counted: the core's and
/// the FFI modules') and the rows of its table "Where the `unsafe` is" (module -> blocks).
fn design_unsafe() -> (BTreeSet<String>, BTreeSet<String>, BTreeMap<String, usize>) {
    let mut b = design_block("unsafe", &["core", "ffi"]);
    let (core, ffi) = (b.remove("core").unwrap(), b.remove("ffi").unwrap());
    let text = std::fs::read_to_string(root().join("DESIGN.md")).expect("DESIGN.md");
    let table = text
        .split("| module | blocks | why it stays |\n")
        .nth(1)
        .expect("DESIGN.md has the table of the unsafe outside the core");
    let mut rows = BTreeMap::new();
    for line in table.lines().skip(1) {
        if !line.starts_with('|') {
            break;
        }
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        let module = cells[1].trim_matches('`').to_string();
        let n: usize = cells[2].parse().expect("a count of blocks");
        rows.insert(module, n);
    }
    (core, ffi, rows)
}

/// Lines holding `unsafe {` per top-level module (as `grep -c 'unsafe {'` counts them: doc
/// examples and tests included).
fn unsafe_blocks() -> BTreeMap<String, usize> {
    let src = root().join("src");
    let mut files = Vec::new();
    rs_files(&src, &mut files);
    let mut counts = BTreeMap::new();
    for f in files {
        let Some(top) = module_path(&src, &f).first().cloned() else {
            continue; // lib.rs
        };
        let text = std::fs::read_to_string(&f).expect("read a source file");
        *counts.entry(top).or_insert(0) += text.lines().filter(|l| l.contains("unsafe {")).count();
    }
    counts
}

#[test]
fn the_unsafe_outside_the_core_is_what_design_md_lists() {
    let (core, ffi, rows) = design_unsafe();
    let counts = unsafe_blocks();
    let mut wrong = Vec::new();
    for (module, &n) in &counts {
        if core.contains(module) {
            continue;
        }
        let listed = rows.get(module).copied().unwrap_or(0);
        if n != listed {
            wrong.push(format!("{module}: {n} blocks, DESIGN.md says {listed}"));
        }
    }
    for module in rows.keys() {
        if !counts.contains_key(module) {
            wrong.push(format!(
                "{module}: in DESIGN.md's table, not a module of src/"
            ));
        }
    }
    assert!(
        wrong.is_empty(),
        "DESIGN.md's unsafe table is out of date: {wrong:#?}"
    );
    let outside: usize = rows
        .iter()
        .filter(|(m, _)| !ffi.contains(*m) && !core.contains(*m))
        .map(|(_, n)| n)
        .sum();
    assert!(
        outside <= 5,
        "{outside} unsafe blocks outside the core and the FFI modules (at most 5): {rows:?}"
    );
}
