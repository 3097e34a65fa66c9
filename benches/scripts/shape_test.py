#!/usr/bin/env python3
"""Tests of shape.py on small workspaces written for each test (standard library only).

    python3 benches/scripts/shape_test.py
"""
import io
import os
import sys
import tempfile
import textwrap
import unittest
from contextlib import redirect_stderr, redirect_stdout

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import shape  # noqa: E402


def workspace(files, crate="c"):
    """A workspace of one crate (`c` unless named) with the given src files (path -> text)."""
    root = tempfile.mkdtemp(prefix="shape-test-")
    with open(os.path.join(root, "Cargo.toml"), "w", encoding="utf8") as f:
        f.write(f'[workspace]\nmembers = [\n    "{crate}",\n]\n')
    for path, text in files.items():
        full = os.path.join(root, crate, "src", path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w", encoding="utf8") as f:
            f.write(textwrap.dedent(text))
    return root


def measure(files):
    return shape.measure(workspace(files))


class Lexing(unittest.TestCase):
    def test_braces_in_strings_chars_and_comments_are_not_structure(self):
        src = 'fn a<\'x>(s: &\'x str) { let c = \'{\'; let r = r#"}"#; let b = b"}"; /* { /* } */ */ // }\n}'
        _, masked = shape.lex(src)
        self.assertEqual(shape.match_brace(masked, masked.index("{")), len(src) - 1)

    def test_use_trees_expand_with_aliases_and_globs(self):
        self.assertEqual(
            shape.expand_use("crate::{a::B, c::{d, e as f}, g::*}"),
            [["crate", "a", "B"], ["crate", "c", "d"], ["crate", "c", "e@f"], ["crate", "g", "*"]],
        )


class Lines(unittest.TestCase):
    def test_tests_testing_and_comments_are_not_production(self):
        r = measure(
            {
                "lib.rs": """\
                    //! Docs.
                    pub mod a;
                    mod testing;

                    /// A doc comment.
                    pub fn one() {}
                    #[cfg(test)]
                    mod tests {
                        #[test]
                        fn t() {}
                    }
                """,
                "a.rs": "pub fn two() {\n    // a comment\n}\n#[cfg(test)]\nmod tests;\n",
                "a/tests.rs": "fn not_counted() {}\n",
                "testing.rs": "pub fn not_counted() {}\n",
            }
        )
        # lib.rs: `pub mod a;`, `mod testing;` is left out with its file, `pub fn one() {}`;
        # a.rs: `pub fn two() {` and `}`.
        self.assertEqual(r["crates"]["c"]["production_lines"], 4)

    def test_the_planted_bugs_are_not_production(self):
        r = measure(
            {
                "lib.rs": """                    pub fn one() {
                        #[cfg(feature = "planted-bugs")]
                        if planted() {
                            return;
                        }
                    }
                    #[cfg(feature = "planted-bugs")]
                    pub mod planted;
                """,
                "planted.rs": "pub fn not_counted() {}\n",
            }
        )
        # `pub fn one() {` and `}`.
        self.assertEqual(r["crates"]["c"]["production_lines"], 2)


class Cycles(unittest.TestCase):
    def test_two_modules_importing_each_other_are_a_cycle(self):
        r = measure(
            {
                "lib.rs": "pub mod a;\npub mod b;\n",
                "a.rs": "use crate::b::B;\npub struct A;\n",
                "b.rs": "pub struct B;\npub fn f() -> crate::a::A { crate::a::A }\n",
            }
        )
        self.assertEqual(r["crates"]["c"]["cycles"], [["a", "b"]])
        self.assertEqual(r["figures"]["import_cycles"], 1)

    def test_a_path_through_a_reexport_reaches_the_defining_module(self):
        # `crate::Clock` is clock's item: a -> clock, not a -> the crate root (which would close
        # a circle with the root's `pub use`).
        r = measure(
            {
                "lib.rs": "pub mod a;\npub mod clock;\npub use clock::Clock;\n",
                "clock.rs": "pub struct Clock;\n",
                "a.rs": "pub fn f(_: crate::Clock) {}\n",
            }
        )
        self.assertEqual(r["crates"]["c"]["cycles"], [])
        self.assertEqual(r["crates"]["c"]["upward_imports"], 0)

    def test_a_child_using_its_parent_is_upward_not_a_cycle(self):
        r = measure(
            {
                "lib.rs": "pub mod web;\n",
                "web/mod.rs": "mod views;\npub struct State;\npub fn page() { views::render(); }\n",
                "web/views.rs": "use super::State;\npub fn render() {}\n",
            }
        )
        self.assertEqual(r["crates"]["c"]["cycles"], [])
        self.assertEqual(r["crates"]["c"]["upward_imports"], 1)

    def test_check_cycles_fails_on_a_cycle(self):
        root = workspace(
            {
                "lib.rs": "mod a;\nmod b;\n",
                "a.rs": "use super::b::B;\npub struct A;\n",
                "b.rs": "use crate::a::A;\npub struct B;\n",
            }
        )
        sys.argv = ["shape.py", "--root", root, "--check-cycles"]
        with redirect_stdout(io.StringIO()), redirect_stderr(io.StringIO()) as err:
            self.assertEqual(shape.main(), 1)
        self.assertIn("import_cycles: 1 > 0", err.getvalue())


class Types(unittest.TestCase):
    def test_public_methods_add_up_over_impl_blocks_and_files(self):
        r = measure(
            {
                "lib.rs": "pub mod a;\npub mod b;\npub struct PaymentService;\n",
                "a.rs": """\
                    impl crate::PaymentService {
                        pub fn one(&self) {}
                        pub async fn two(&self) {}
                        pub(crate) fn internal(&self) {}
                        fn private(&self) {}
                    }
                    impl Default for crate::PaymentService {
                        fn default() -> Self { crate::PaymentService }
                    }
                """,
                "b.rs": "impl<T> std::fmt::Debug for Wrap<T> {}\nimpl crate::PaymentService {\n    pub const fn three() {}\n}\n",
            }
        )
        self.assertEqual(r["largest_service"]["type"], "PaymentService")
        self.assertEqual(r["largest_service"]["methods"], 3)
        self.assertEqual(r["largest_service"]["impl_blocks"], 2)

    def test_required_methods_of_port_traits(self):
        r = measure(
            {
                "lib.rs": "pub mod store;\npub mod clock;\n",
                "store.rs": """\
                    pub trait PaymentStore: Send + Sync {
                        async fn get(&self, id: [u8; 16]) -> Result<(), E>;
                        async fn put(&self) -> Result<(), E>;
                        async fn provided(&self) -> Result<(), E> { self.put().await }
                    }
                    pub trait PaymentStoreExt: PaymentStore {
                        fn by_name(&self) {}
                    }
                """,
                "clock.rs": "pub trait Clock {\n    fn now(&self) -> u64;\n}\n",
            }
        )
        ports = {p["trait"]: (p["required"], p["provided"]) for p in r["ports"]}
        # Clock is neither in a store file nor async: not a port of this count.
        self.assertEqual(ports, {"PaymentStore": (2, 1)})

    def test_result_string_and_the_longest_function(self):
        r = measure(
            {
                "lib.rs": """\
                    pub fn bad() -> Result<Vec<(u8, String)>, String> { Ok(vec![]) }
                    pub fn fine() -> Result<String, Box<dyn std::error::Error>> {
                        Ok(String::new())
                    }
                    pub fn callback() -> Result<Box<dyn Fn() -> u8>, std::string::String> {
                        todo!()
                    }
                """,
            }
        )
        self.assertEqual([p.split(":")[1] for p in r["result_string"]], ["1", "5"])
        self.assertEqual(r["longest_functions"][0]["name"], "crate::fine")
        self.assertEqual(r["longest_functions"][0]["lines"], 3)


class Docs(unittest.TestCase):
    def test_the_module_table_and_the_port_figures_are_compared_with_the_code(self):
        root = workspace(
            {
                "lib.rs": "pub mod store;\npub mod clock;\n",
                "store.rs": "pub trait PaymentStore {\n    fn get(&self);\n    fn put(&self);\n}\n",
                "clock.rs": "pub struct Clock;\n",
            },
            crate=shape.CORE_CRATE,
        )
        doc = os.path.join(root, "architecture.md")
        table = "### `payments-core`\n\n| module | what |\n|---|---|\n| `store` | the port |\n"
        repos = "\n| repository | holds | required methods |\n|---|---|---|\n| `PaymentStore` | payments | 3 |\n"
        with open(doc, "w", encoding="utf8") as f:
            f.write(table + repos + "\nThat is <!-- shape: port_required:payments-core -->2 methods.\n")
        problems = shape.check_docs(root, doc, shape.measure(root))
        self.assertEqual(len(problems), 2, problems)
        self.assertIn("lacks `clock`", problems[0])
        self.assertIn("`PaymentStore` has 3 required methods in the doc, 2 in the code", problems[1])


if __name__ == "__main__":
    unittest.main()
