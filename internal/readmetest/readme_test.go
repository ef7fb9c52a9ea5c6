package readmetest

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// snippet is one ```go block of the README.
type snippet struct {
	line int // of the opening fence
	code string
}

// goBlocks returns the ```go blocks of a Markdown text.
func goBlocks(md []byte) ([]snippet, error) {
	var (
		out  []snippet
		cur  *strings.Builder
		from int
	)
	sc := bufio.NewScanner(bytes.NewReader(md))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case cur == nil && strings.TrimSpace(line) == "```go":
			cur, from = &strings.Builder{}, n
		case cur != nil && strings.TrimSpace(line) == "```":
			out = append(out, snippet{line: from, code: cur.String()})
			cur = nil
		case cur != nil:
			cur.WriteString(line)
			cur.WriteByte('\n')
		}
	}
	if cur != nil {
		return nil, fmt.Errorf("the ```go block of line %d is not closed", from)
	}
	return out, sc.Err()
}

func TestGoBlocks(t *testing.T) {
	md := "text\n```go\npackage main\n```\n```sh\nls\n```\n  ```go\nx\n  ```\n"
	got, err := goBlocks([]byte(md))
	if err != nil {
		t.Fatal(err)
	}
	want := []snippet{{2, "package main\n"}, {8, "x\n"}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("goBlocks = %v, want %v", got, want)
	}
	if _, err := goBlocks([]byte("```go\npackage main\n")); err == nil {
		t.Fatal("an unclosed block is not an error")
	}
}

// TestREADMESnippetsBuild writes each Go snippet of the README as a
// program of its own in a scratch module that uses this working tree's
// promlib, and builds and vets them all with one go command each.
func TestREADMESnippetsBuild(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks, err := goBlocks(md)
	if err != nil {
		t.Fatal(err)
	}
	if len(blocks) == 0 {
		t.Fatal("README.md has no ```go block")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to build the snippets: %v", err)
	}
	dir := t.TempDir()
	gomod := "module readmesnippets\n\ngo 1.26.0\n\nrequire github.com/promethean/promlib v0.0.0\n\nreplace github.com/promethean/promlib => " + root + "\n"
	write(t, filepath.Join(dir, "go.mod"), gomod)
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, "go.sum"), string(sum))
	for _, b := range blocks {
		if !strings.HasPrefix(b.code, "package main\n") {
			t.Errorf("README.md:%d: a Go snippet is a whole program: it starts with \"package main\" and its imports", b.line)
			continue
		}
		// A line directive makes the compiler's errors name the README's lines.
		code := strings.Replace(b.code, "package main\n", fmt.Sprintf("package main\n\n//line README.md:%d\n", b.line+2), 1)
		write(t, filepath.Join(dir, fmt.Sprintf("line%04d", b.line), "main.go"), code)
	}
	for _, args := range [][]string{{"build", "-o", os.DevNull, "./..."}, {"vet", "./..."}} {
		cmd := exec.Command(goTool, args...)
		cmd.Dir = dir
		// The scratch module's graph loads the go.mod files of a few old
		// modules the library's own (pruned) graph never reads, such as
		// those that github.com/jackc/pgpassfile requires; a fresh module
		// cache lacks them. They come from the environment's GOPROXY,
		// checked against the library's go.sum, copied above.
		cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go %s of the README's snippets: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
