// chart-render: renders a Helm chart's templates where the helm binary cannot be had (this
// project's machines reach only npm and Debian, and Debian ships no helm). It uses Go's
// text/template, the engine helm itself runs, with helm's options (missingkey=zero, "<no value>"
// blanked) and the subset of helm/sprig functions the chart uses, implemented to their documented
// behaviour. Values come merged, as JSON, from the caller (test/support/chart.ts).
//
//	chart-render -chart DIR -values merged.json -name RELEASE -namespace NS
//
// Prints every rendered manifest as "---\n# Source: <chart>/templates/<file>\n<body>". A template
// calling an unknown function fails to parse: the chart may use only what is implemented here.
package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"text/template"
)

func main() {
	chart := flag.String("chart", "", "chart directory")
	valuesPath := flag.String("values", "", "merged values as JSON")
	name := flag.String("name", "release", "release name")
	namespace := flag.String("namespace", "default", "release namespace")
	flag.Parse()
	if err := run(*chart, *valuesPath, *name, *namespace); err != nil {
		fmt.Fprintln(os.Stderr, "Error:", err)
		os.Exit(1)
	}
}

func run(chart, valuesPath, name, namespace string) error {
	raw, err := os.ReadFile(valuesPath)
	if err != nil {
		return err
	}
	var values map[string]interface{}
	if err := json.Unmarshal(raw, &values); err != nil {
		return fmt.Errorf("values %s: %w", valuesPath, err)
	}
	meta, err := chartMeta(filepath.Join(chart, "Chart.yaml"))
	if err != nil {
		return err
	}
	files, err := filepath.Glob(filepath.Join(chart, "templates", "*"))
	if err != nil {
		return err
	}
	sort.Strings(files)
	root := template.New("root").Option("missingkey=zero")
	root.Funcs(funcs(root))
	var names []string
	for _, f := range files {
		if strings.HasSuffix(f, ".txt") || strings.HasSuffix(f, "NOTES.txt") {
			continue
		}
		body, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		n := meta["name"].(string) + "/templates/" + filepath.Base(f)
		if _, err := root.New(n).Parse(string(body)); err != nil {
			return err
		}
		names = append(names, n)
	}
	data := map[string]interface{}{
		"Values":  values,
		"Release": map[string]interface{}{"Name": name, "Namespace": namespace, "Service": "Helm", "IsInstall": true, "IsUpgrade": false, "Revision": 1},
		"Chart":   map[string]interface{}{"Name": meta["name"], "Version": meta["version"], "AppVersion": meta["appVersion"]},
		"Files":   chartFiles{dir: chart},
	}
	var out bytes.Buffer
	for _, n := range names {
		if strings.HasPrefix(filepath.Base(n), "_") {
			continue
		}
		var b bytes.Buffer
		if err := root.ExecuteTemplate(&b, n, data); err != nil {
			return err
		}
		text := strings.ReplaceAll(b.String(), "<no value>", "")
		if strings.TrimSpace(text) == "" {
			continue
		}
		fmt.Fprintf(&out, "---\n# Source: %s\n%s\n", n, strings.TrimRight(text, "\n"))
	}
	_, err = os.Stdout.Write(out.Bytes())
	return err
}

// chartFiles is helm's .Files, for Get only: a file of the chart (not under templates/) as text.
type chartFiles struct{ dir string }

func (f chartFiles) Get(name string) string {
	b, err := os.ReadFile(filepath.Join(f.dir, filepath.Clean("/"+name)))
	if err != nil {
		return ""
	}
	return string(b)
}

// chartMeta reads the three scalar keys of Chart.yaml it needs (name, version, appVersion).
func chartMeta(path string) (map[string]interface{}, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	meta := map[string]interface{}{}
	for _, line := range strings.Split(string(raw), "\n") {
		for _, k := range []string{"name", "version", "appVersion"} {
			if strings.HasPrefix(line, k+":") {
				v := strings.TrimSpace(strings.TrimPrefix(line, k+":"))
				meta[k] = strings.Trim(v, `"'`)
			}
		}
	}
	if meta["name"] == nil {
		return nil, errors.New(path + ": no name")
	}
	return meta, nil
}

func funcs(root *template.Template) template.FuncMap {
	return template.FuncMap{
		"include": func(name string, data interface{}) (string, error) {
			var b bytes.Buffer
			if err := root.ExecuteTemplate(&b, name, data); err != nil {
				return "", err
			}
			return strings.ReplaceAll(b.String(), "<no value>", ""), nil
		},
		"required": func(msg string, v interface{}) (interface{}, error) {
			if v == nil {
				return nil, errors.New(msg)
			}
			if s, ok := v.(string); ok && s == "" {
				return nil, errors.New(msg)
			}
			return v, nil
		},
		"fail": func(msg string) (string, error) { return "", errors.New(msg) },
		"default": func(d interface{}, given ...interface{}) interface{} {
			if len(given) == 0 || empty(given[0]) {
				return d
			}
			return given[0]
		},
		"empty":   empty,
		"toYaml":  func(v interface{}) string { return strings.TrimSuffix(toYaml(v, 0), "\n") },
		"toJson":  func(v interface{}) string { b, _ := json.Marshal(v); return string(b) },
		"nindent": func(n int, s string) string { return "\n" + indent(n, s) },
		"indent":  indent,
		"quote": func(vs ...interface{}) string {
			parts := make([]string, 0, len(vs))
			for _, v := range vs {
				if v != nil {
					parts = append(parts, strconv.Quote(toString(v)))
				}
			}
			return strings.Join(parts, " ")
		},
		"toString": toString,
		"trunc": func(n int, s string) string {
			if len(s) > n {
				return s[:n]
			}
			return s
		},
		"trimSuffix": func(suffix, s string) string { return strings.TrimSuffix(s, suffix) },
		"contains":   func(sub, s string) bool { return strings.Contains(s, sub) },
		"replace":    func(old, new, s string) string { return strings.ReplaceAll(s, old, new) },
		"lower":      strings.ToLower,
		"b64enc":     func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) },
		"sha256sum":  func(s string) string { h := sha256.Sum256([]byte(s)); return hex.EncodeToString(h[:]) },
		"hasKey":     func(m map[string]interface{}, k string) bool { _, ok := m[k]; return ok },
		"int":        func(v interface{}) int64 { return toInt(v) },
		"add":        func(a, b interface{}) int64 { return toInt(a) + toInt(b) },
		"sub":        func(a, b interface{}) int64 { return toInt(a) - toInt(b) },
		"div":        func(a, b interface{}) int64 { return toInt(a) / toInt(b) },
		"mul":        func(a, b interface{}) int64 { return toInt(a) * toInt(b) },
		"list":       func(vs ...interface{}) []interface{} { return vs },
		"concat": func(ls ...[]interface{}) []interface{} {
			var out []interface{}
			for _, l := range ls {
				out = append(out, l...)
			}
			return out
		},
		"deepCopy": func(v interface{}) interface{} {
			b, _ := json.Marshal(v)
			var out interface{}
			_ = json.Unmarshal(b, &out)
			return out
		},
		"set": func(m map[string]interface{}, k string, v interface{}) map[string]interface{} { m[k] = v; return m },
		"dict": func(kv ...interface{}) map[string]interface{} {
			m := map[string]interface{}{}
			for i := 0; i+1 < len(kv); i += 2 {
				m[toString(kv[i])] = kv[i+1]
			}
			return m
		},
	}
}

func indent(n int, s string) string {
	pad := strings.Repeat(" ", n)
	return pad + strings.ReplaceAll(s, "\n", "\n"+pad)
}

func toInt(v interface{}) int64 {
	switch x := v.(type) {
	case nil:
		return 0
	case float64:
		return int64(x)
	case int:
		return int64(x)
	case int64:
		return x
	case string:
		i, _ := strconv.ParseInt(x, 10, 64)
		return i
	case bool:
		if x {
			return 1
		}
		return 0
	}
	return 0
}

func toString(v interface{}) string {
	switch x := v.(type) {
	case string:
		return x
	case float64:
		if x == math.Trunc(x) && math.Abs(x) < 1e15 {
			return strconv.FormatInt(int64(x), 10)
		}
		return strconv.FormatFloat(x, 'g', -1, 64)
	case nil:
		return ""
	}
	return fmt.Sprint(v)
}

// empty is sprig's: nil, false, 0, "", and empty collections.
func empty(v interface{}) bool {
	if v == nil {
		return true
	}
	r := reflect.ValueOf(v)
	switch r.Kind() {
	case reflect.String, reflect.Slice, reflect.Map, reflect.Array:
		return r.Len() == 0
	case reflect.Bool:
		return !r.Bool()
	case reflect.Float64, reflect.Float32:
		return r.Float() == 0
	case reflect.Int, reflect.Int64, reflect.Int32:
		return r.Int() == 0
	}
	return false
}

// toYaml emits block YAML with sorted keys (as helm's toYaml does, through JSON); strings are
// double-quoted (JSON escapes are valid YAML), so no value changes type on the way back.
func toYaml(v interface{}, level int) string {
	pad := strings.Repeat("  ", level)
	var b strings.Builder
	switch x := v.(type) {
	case map[string]interface{}:
		if len(x) == 0 {
			return "{}\n"
		}
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			child := x[k]
			b.WriteString(pad + yamlKey(k) + ":")
			if isBlock(child) {
				b.WriteString("\n" + toYaml(child, level+1))
			} else {
				b.WriteString(" " + scalar(child) + "\n")
			}
		}
		return b.String()
	case []interface{}:
		if len(x) == 0 {
			return "[]\n"
		}
		for _, item := range x {
			if isBlock(item) {
				inner := toYaml(item, level+1)
				// The first line of the item goes after "- ".
				inner = strings.TrimPrefix(inner, strings.Repeat("  ", level+1))
				b.WriteString(pad + "- " + inner)
			} else {
				b.WriteString(pad + "- " + scalar(item) + "\n")
			}
		}
		return b.String()
	}
	return scalar(v) + "\n"
}

func isBlock(v interface{}) bool {
	switch x := v.(type) {
	case map[string]interface{}:
		return len(x) > 0
	case []interface{}:
		return len(x) > 0
	}
	return false
}

func yamlKey(k string) string {
	for _, c := range k {
		if !(c == '_' || c == '-' || c == '.' || c == '/' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) {
			return strconv.Quote(k)
		}
	}
	if k == "" || strings.ContainsAny(k[:1], "-.0123456789") {
		return strconv.Quote(k)
	}
	return k
}

func scalar(v interface{}) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case bool:
		if x {
			return "true"
		}
		return "false"
	case float64:
		return toString(x)
	case string:
		b, _ := json.Marshal(x)
		return string(b)
	case map[string]interface{}:
		return "{}"
	case []interface{}:
		return "[]"
	}
	b, _ := json.Marshal(v)
	return string(b)
}
