package archtest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path"
	"slices"
	"strings"
)

// Package is what a rule needs of a package: the fields of `go list
// -json` of the same names.
type Package struct {
	ImportPath string
	Imports    []string
}

// List runs `go list -deps -json` on patterns in dir and returns every
// package it names, the dependencies included.
func List(ctx context.Context, dir string, patterns ...string) ([]Package, error) {
	args := append([]string{"list", "-deps", "-json=ImportPath,Imports"}, patterns...)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("archtest: go list: %w: %s", err, stderr.String())
	}
	var pkgs []Package
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p Package
		err := dec.Decode(&p)
		if errors.Is(err, io.EOF) {
			return pkgs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("archtest: go list output: %w", err)
		}
		pkgs = append(pkgs, p)
	}
}

// Violation is one forbidden import of one package.
type Violation struct {
	Rule    string
	Package string
	Import  string
	// Chain is the import path from Package to Import, both included.
	Chain []string
}

func (v Violation) String() string {
	return fmt.Sprintf("%s imports %s (%s): %s", v.Package, v.Import, strings.Join(v.Chain, " -> "), v.Rule)
}

// Check applies rules to the packages of module among pkgs and returns
// the violations. For each package and rule it reports every forbidden
// package that the package reaches through allowed ones, with the
// shortest chain to it.
func Check(module string, pkgs []Package, rules []Rule) []Violation {
	imports := make(map[string][]string, len(pkgs))
	for _, p := range pkgs {
		imports[p.ImportPath] = p.Imports
	}
	var out []Violation
	for _, p := range pkgs {
		if !inModule(module, p.ImportPath) {
			continue
		}
		for _, r := range rules {
			if !matchAny(module, r.Packages, p.ImportPath) || matchAny(module, r.Except, p.ImportPath) {
				continue
			}
			out = append(out, reach(module, p.ImportPath, imports, r)...)
		}
	}
	return out
}

// reach walks the imports of from breadth first and returns the forbidden
// packages it meets; it does not walk past them.
func reach(module, from string, imports map[string][]string, r Rule) []Violation {
	forbidden := func(p string) bool {
		return matchAny(module, r.Forbid, p) && !matchAny(module, r.Allow, p)
	}
	prev := map[string]string{from: ""}
	queue := []string{from}
	var out []Violation
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, imp := range imports[p] {
			if _, seen := prev[imp]; seen {
				continue
			}
			prev[imp] = p
			if !forbidden(imp) {
				queue = append(queue, imp)
				continue
			}
			chain := []string{imp}
			for q := p; q != ""; q = prev[q] {
				chain = append(chain, q)
			}
			slices.Reverse(chain)
			for i := range chain {
				chain[i] = short(module, chain[i])
			}
			out = append(out, Violation{Rule: r.Name, Package: short(module, from), Import: short(module, imp), Chain: chain})
		}
	}
	return out
}

func inModule(module, p string) bool { return p == module || strings.HasPrefix(p, module+"/") }

// short drops the module prefix of p.
func short(module, p string) string {
	if s, ok := strings.CutPrefix(p, module+"/"); ok {
		return s
	}
	return p
}

func matchAny(module string, patterns []string, p string) bool {
	for _, pat := range patterns {
		if match(module, pat, p) {
			return true
		}
	}
	return false
}

// match reports whether import path p matches pattern pat (see [Rule]).
func match(module, pat, p string) bool {
	if pat == "..." {
		return inModule(module, p)
	}
	first, _, _ := strings.Cut(pat, "/")
	if !strings.Contains(first, ".") {
		pat = module + "/" + pat
	}
	if prefix, ok := strings.CutSuffix(pat, "/..."); ok {
		return p == prefix || strings.HasPrefix(p, prefix+"/")
	}
	ok, _ := path.Match(pat, p)
	return ok
}

// Unplaced returns, for each package of module among pkgs that is in no
// layer of layers or in more than one, a line naming it and those layers.
func Unplaced(module string, pkgs []Package, layers []Layer) []string {
	var out []string
	for _, p := range pkgs {
		if !inModule(module, p.ImportPath) {
			continue
		}
		var in []string
		for _, l := range layers {
			if matchAny(module, l.Packages, p.ImportPath) {
				in = append(in, l.Name)
			}
		}
		switch len(in) {
		case 0:
			out = append(out, short(module, p.ImportPath)+": in no layer")
		case 1:
		default:
			out = append(out, short(module, p.ImportPath)+": in layers "+strings.Join(in, ", "))
		}
	}
	return out
}
