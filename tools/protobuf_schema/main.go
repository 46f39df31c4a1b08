// Command protobuf_schema writes the table kubereflector's protobuf decoder reads
// (src/kubereflector/protobuf/_schema.json): for every kind client-go's scheme
// registers, the protobuf field numbers of its Go types beside what Go's
// encoding/json does with each field (its JSON name, omitempty, pointer, inline).
// With it, a message decoded from kube-apiserver's protobuf becomes the very
// JSON-shaped value the server's JSON gives, as the server's own JSON is the Go
// struct it decoded from etcd's protobuf.
//
// It reads the Go types by reflection, so the table is what the tree's Go code
// does, not what a .proto file says. A kind that reaches a type with a custom
// JSON encoding the decoder does not know is left out of "kinds" (kubereflector
// asks the server for JSON for it). "resources" maps each resource's plural name
// (client-go's guess from its kind, as the built-in REST storage names them) to
// its list's kind, so a client knows before it asks.
//
// Built by tools/protobuf_schema.py inside a Kubernetes source tree with vendor/.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"reflect"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/scheme"
)

// Field flags (a bit set).
const (
	omitEmpty = 1 // `json:",omitempty"`
	pointer   = 2 // a pointer: absent means nil (JSON null, or nothing with omitempty)
	inline    = 4 // an embedded struct whose fields JSON flattens into its parent's
)

// special are the types with their own JSON encoding the decoder implements.
var special = map[reflect.Type]string{
	reflect.TypeOf(metav1.Time{}):          "time",
	reflect.TypeOf(metav1.MicroTime{}):     "microtime",
	reflect.TypeOf(metav1.Duration{}):      "duration",
	reflect.TypeOf(metav1.FieldsV1{}):      "fieldsv1",
	reflect.TypeOf(resource.Quantity{}):    "quantity",
	reflect.TypeOf(intstr.IntOrString{}):   "intorstring",
	reflect.TypeOf(runtime.RawExtension{}): "rawextension",
}

var (
	jsonMarshaler  = reflect.TypeOf((*json.Marshaler)(nil)).Elem()
	protoMarshaler = reflect.TypeOf((*interface{ Marshal() ([]byte, error) })(nil)).Elem()
)

type generator struct {
	types       map[string]interface{} // type name -> [field...] or {"items": shape}
	unsupported map[string]string      // type name -> why
}

func typeName(t reflect.Type) string {
	path := t.PkgPath()
	for _, prefix := range []string{"k8s.io/api/", "k8s.io/apimachinery/pkg/apis/", "k8s.io/apimachinery/pkg/"} {
		if strings.HasPrefix(path, prefix) {
			return strings.TrimPrefix(path, prefix) + "." + t.Name()
		}
	}
	return path + "." + t.Name()
}

func scalar(t reflect.Type) (string, bool) {
	switch t.Kind() {
	case reflect.String:
		return "string", true
	case reflect.Bool:
		return "bool", true
	case reflect.Int32:
		return "int32", true
	case reflect.Int64:
		return "int64", true
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return "bytes", true
		}
	}
	return "", false
}

// shape is how a value of type t is encoded: a scalar or special name,
// ["message", name], ["list", shape] or ["map", shape] (string keys).
func (g *generator) shape(t reflect.Type, where string) (interface{}, error) {
	if name, ok := special[t]; ok {
		return name, nil
	}
	if name, ok := scalar(t); ok {
		if t.Name() != "" && t.Kind() != reflect.String && t.Kind() != reflect.Slice &&
			reflect.PointerTo(t).Implements(jsonMarshaler) {
			return nil, fmt.Errorf("%s: %s has its own JSON encoding", where, t)
		}
		return name, nil
	}
	switch t.Kind() {
	case reflect.Slice:
		elem, err := g.shape(t.Elem(), where+"[]")
		if err != nil {
			return nil, err
		}
		if t.Name() != "" && reflect.PointerTo(t).Implements(protoMarshaler) {
			// A named slice with its own protobuf message: {repeated items = 1}.
			name := typeName(t)
			g.types[name] = map[string]interface{}{"items": elem}
			return []interface{}{"message", name}, nil
		}
		return []interface{}{"list", elem}, nil
	case reflect.Map:
		if t.Key().Kind() != reflect.String {
			return nil, fmt.Errorf("%s: map key %s is not a string", where, t.Key())
		}
		value, err := g.shape(t.Elem(), where+"{}")
		if err != nil {
			return nil, err
		}
		return []interface{}{"map", value}, nil
	case reflect.Struct:
		name := typeName(t)
		if err := g.message(t); err != nil {
			return nil, err
		}
		return []interface{}{"message", name}, nil
	}
	return nil, fmt.Errorf("%s: %s (%s) has no protobuf shape this decoder knows", where, t, t.Kind())
}

// message adds struct t's fields to the table (once).
func (g *generator) message(t reflect.Type) error {
	name := typeName(t)
	if _, done := g.types[name]; done {
		return nil
	}
	if why, bad := g.unsupported[name]; bad {
		return fmt.Errorf("%s", why)
	}
	if reflect.PointerTo(t).Implements(jsonMarshaler) || t.Implements(jsonMarshaler) {
		why := fmt.Sprintf("%s has its own JSON encoding", name)
		g.unsupported[name] = why
		return fmt.Errorf("%s", why)
	}
	g.types[name] = nil // in progress (recursive types)
	fields := []interface{}{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("protobuf")
		jsonTag := f.Tag.Get("json")
		if jsonTag == "-" {
			continue // never in JSON
		}
		if tag == "" {
			if f.Anonymous && f.Type == reflect.TypeOf(metav1.TypeMeta{}) {
				continue // kind and apiVersion: the protobuf envelope carries them
			}
			delete(g.types, name)
			why := fmt.Sprintf("%s.%s is in JSON but not in protobuf", name, f.Name)
			g.unsupported[name] = why
			return fmt.Errorf("%s", why)
		}
		parts := strings.Split(tag, ",")
		number, err := strconv.Atoi(parts[1])
		if err != nil {
			return fmt.Errorf("%s.%s: protobuf tag %q", name, f.Name, tag)
		}
		jsonName, options, _ := strings.Cut(jsonTag, ",")
		flags := 0
		if strings.Contains(","+options+",", ",omitempty,") {
			flags |= omitEmpty
		}
		if strings.Contains(","+options+",", ",string,") {
			delete(g.types, name)
			why := fmt.Sprintf("%s.%s: the json ,string option", name, f.Name)
			g.unsupported[name] = why
			return fmt.Errorf("%s", why)
		}
		ft := f.Type
		if ft.Kind() == reflect.Pointer {
			flags |= pointer
			ft = ft.Elem()
		}
		if jsonName == "" {
			if f.Anonymous && ft.Kind() == reflect.Struct {
				flags |= inline
			} else {
				jsonName = f.Name
			}
		}
		shape, err := g.shape(ft, name+"."+f.Name)
		if err != nil {
			delete(g.types, name)
			g.unsupported[name] = err.Error()
			return err
		}
		fields = append(fields, []interface{}{number, jsonName, flags, shape})
	}
	g.types[name] = fields
	return nil
}

func main() {
	kubernetes := flag.String("kubernetes", "", "the release of the tree (recorded in the table)")
	flag.Parse()
	g := &generator{types: map[string]interface{}{}, unsupported: map[string]string{}}
	kinds := map[string]string{}
	resources := map[string]string{} // apiVersion/plural -> its list kind
	left := map[string]string{}
	all := scheme.Scheme.AllKnownTypes()
	for gvk, t := range all {
		if gvk.Version == runtime.APIVersionInternal || t.Kind() != reflect.Struct {
			continue
		}
		if _, ok := reflect.PointerTo(t).MethodByName("Unmarshal"); !ok {
			continue // no protobuf for it
		}
		apiVersion := gvk.GroupVersion().String()
		key := apiVersion + "/" + gvk.Kind
		if err := g.message(t); err != nil {
			left[key] = err.Error()
			continue
		}
		kinds[key] = typeName(t)
		if strings.HasSuffix(gvk.Kind, "List") {
			if _, listed := all[gvk.GroupVersion().WithKind(strings.TrimSuffix(gvk.Kind, "List"))]; listed {
				plural, _ := meta.UnsafeGuessKindToResource(gvk.GroupVersion().WithKind(strings.TrimSuffix(gvk.Kind, "List")))
				resources[apiVersion+"/"+plural.Resource] = gvk.Kind
			}
		}
	}
	for name, fields := range g.types {
		if fields == nil {
			fmt.Fprintf(os.Stderr, "protobuf_schema: %s was left unfinished\n", name)
			os.Exit(1)
		}
	}
	out := map[string]interface{}{
		"kubernetes": *kubernetes,
		"kinds":      kinds,
		"resources":  resources,
		"types":      g.types,
		"left_out":   left,
	}
	encoder := json.NewEncoder(os.Stdout)
	encoder.SetIndent("", " ")
	if err := encoder.Encode(out); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
