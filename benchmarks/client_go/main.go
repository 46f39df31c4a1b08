// Command client_go is the client-go peer of benchmarks/informers.py: a
// SharedIndexInformer of Pods, as a Go operator gets it, with one no-op event
// handler. It prints one line of JSON and exits.
//
//	client_go sync  -kubeconfig K -namespace NS -pods N -protocol protobuf|json
//	client_go watch -server URL -namespace NS -events N -protocol protobuf|json
//	client_go encode -list-rv RV < events.jsonl > frames
//
// sync: from Run until the informer has synced (HasSynced polled every
// millisecond; cache.WaitForCacheSync polls every 100 ms) and until the handler
// has seen every add; then the heap the cache holds, per Pod (HeapAlloc after
// two runtime.GC, against the same before the informer started).
//
// watch: against benchmarks/_server.py's recorded stream (a list of no Pods,
// then a watch of -events MODIFIED events), from the first event the handler
// sees to the last.
//
// encode: for benchmarks/_server.py, the recorded stream in protobuf, encoded by
// Kubernetes' own serializers as kube-apiserver encodes a watch: reads watch
// events as JSON lines ({"type": ..., "object": <a Pod>}) on stdin and writes,
// each with a 4-byte big-endian length before it, first an empty PodList at
// -list-rv (the list a client makes before it watches), then one
// metav1.WatchEvent per line, its object the Pod in the protobuf envelope.
//
// It is built by benchmarks/_client_go.py inside a Kubernetes source tree with
// vendor/ (the one ../shared/real-apiserver builds from), so no module is
// downloaded.
package main

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	goruntime "runtime"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
)

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "client_go: "+format+"\n", args...)
	os.Exit(2)
}

func heap() uint64 {
	var stats goruntime.MemStats
	goruntime.GC()
	goruntime.GC()
	goruntime.ReadMemStats(&stats)
	return stats.HeapAlloc
}

func config(kubeconfig, server, protocol string) *rest.Config {
	var cfg *rest.Config
	if kubeconfig != "" {
		loaded, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
		if err != nil {
			fail("%s: %v", kubeconfig, err)
		}
		cfg = loaded
	} else {
		cfg = &rest.Config{Host: server}
	}
	// No client-side rate limit: the benchmark measures the cache, not the limiter.
	cfg.QPS, cfg.Burst = -1, 0
	switch protocol {
	case "protobuf":
		cfg.ContentType = "application/vnd.kubernetes.protobuf"
		cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	case "json":
		cfg.ContentType = "application/json"
	default:
		fail("-protocol must be protobuf or json, not %q", protocol)
	}
	return cfg
}

// counter counts adds and updates, as benchmarks/_informer_cases.py's handler
// does: the recorded stream's first event of each Pod reaches the handler as
// an add (the informer starts from an empty list), the others as updates.
type counter struct {
	wanted      int64 // the count at which last is taken
	adds, seen  atomic.Int64
	first, last atomic.Int64 // UnixNano of the first add or update and of the wanted-th
}

func (c *counter) count() {
	now := time.Now().UnixNano()
	n := c.seen.Add(1)
	if n == 1 {
		c.first.Store(now)
	}
	if n == c.wanted {
		c.last.Store(now)
	}
}

func (c *counter) OnAdd(obj interface{}, _ bool) {
	c.adds.Add(1)
	c.count()
}

func (c *counter) OnUpdate(_, obj interface{}) { c.count() }
func (c *counter) OnDelete(obj interface{})    {}

func informer(cfg *rest.Config, namespace string) cache.SharedIndexInformer {
	clientset, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		fail("%v", err)
	}
	factory := informers.NewSharedInformerFactoryWithOptions(
		clientset, 0, informers.WithNamespace(namespace))
	return factory.Core().V1().Pods().Informer()
}

// frame writes data with its length before it (protobuf.LengthDelimitedFramer).
func frame(out *bufio.Writer, data []byte) {
	var size [4]byte
	binary.BigEndian.PutUint32(size[:], uint32(len(data)))
	_, _ = out.Write(size[:])
	_, _ = out.Write(data)
}

func encode(listRV string) {
	envelope := scheme.Codecs.EncoderForVersion(
		protobuf.NewSerializer(scheme.Scheme, scheme.Scheme), v1.SchemeGroupVersion)
	out := bufio.NewWriterSize(os.Stdout, 1<<20)
	var buf bytes.Buffer
	if err := envelope.Encode(&v1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: listRV}}, &buf); err != nil {
		fail("the list: %v", err)
	}
	frame(out, buf.Bytes())
	lines := bufio.NewScanner(os.Stdin)
	lines.Buffer(make([]byte, 1<<20), 1<<26)
	for n := 1; lines.Scan(); n++ {
		var event struct {
			Type   string `json:"type"`
			Object v1.Pod `json:"object"`
		}
		if err := json.Unmarshal(lines.Bytes(), &event); err != nil {
			fail("stdin, line %d: %v", n, err)
		}
		buf.Reset()
		if err := envelope.Encode(&event.Object, &buf); err != nil {
			fail("stdin, line %d: %v", n, err)
		}
		watchEvent := metav1.WatchEvent{Type: event.Type, Object: runtime.RawExtension{Raw: buf.Bytes()}}
		data, err := watchEvent.Marshal()
		if err != nil {
			fail("stdin, line %d: %v", n, err)
		}
		frame(out, data)
	}
	if err := lines.Err(); err != nil {
		fail("stdin: %v", err)
	}
	if err := out.Flush(); err != nil {
		fail("stdout: %v", err)
	}
}

func main() {
	if len(os.Args) < 2 {
		fail("usage: client_go sync|watch [flags]")
	}
	mode := os.Args[1]
	flags := flag.NewFlagSet(mode, flag.ExitOnError)
	kubeconfig := flags.String("kubeconfig", "", "the cluster (sync)")
	server := flags.String("server", "", "the recorded server's URL (watch)")
	namespace := flags.String("namespace", "bench", "the Pods' namespace")
	pods := flags.Int64("pods", 0, "Pods the sync must find")
	events := flags.Int64("events", 0, "events the watch must see")
	protocol := flags.String("protocol", "protobuf", "protobuf or json")
	listRV := flags.String("list-rv", "1", "the empty list's resourceVersion (encode)")
	_ = flags.Parse(os.Args[2:])
	if mode == "encode" {
		encode(*listRV)
		return
	}

	handler := &counter{wanted: *events}
	stop := make(chan struct{})
	deadline := time.Now().Add(10 * time.Minute)
	wait := func(done func() bool, what string) {
		for !done() {
			if time.Now().After(deadline) {
				fail("%s: not done in 10 minutes", what)
			}
			time.Sleep(time.Millisecond)
		}
	}
	result := map[string]any{"protocol": *protocol, "go": goruntime.Version()}
	switch mode {
	case "sync":
		before := heap()
		inf := informer(config(*kubeconfig, "", *protocol), *namespace)
		if _, err := inf.AddEventHandler(handler); err != nil {
			fail("%v", err)
		}
		start := time.Now()
		go inf.Run(stop)
		wait(inf.HasSynced, "the sync")
		synced := time.Since(start)
		wait(func() bool { return handler.adds.Load() >= *pods }, "the handler's adds")
		handled := time.Since(start)
		objects := len(inf.GetStore().List())
		if int64(objects) != *pods {
			fail("synced %d Pods, not %d", objects, *pods)
		}
		held := heap()
		goruntime.KeepAlive(inf)
		result["seconds"] = synced.Seconds()
		result["handled"] = handled.Seconds()
		result["objects"] = objects
		result["heap_bytes_per_object"] = float64(held-before) / float64(objects)
	case "watch":
		inf := informer(config("", *server, *protocol), *namespace)
		if _, err := inf.AddEventHandler(handler); err != nil {
			fail("%v", err)
		}
		go inf.Run(stop)
		wait(func() bool { return handler.seen.Load() >= *events }, "the watch")
		seconds := float64(handler.last.Load()-handler.first.Load()) / 1e9
		result["seconds"] = seconds
		result["events"] = *events
		result["events_per_second"] = float64(*events-1) / seconds
	default:
		fail("unknown mode %q (sync or watch)", mode)
	}
	close(stop)
	out, _ := json.Marshal(result)
	fmt.Println(string(out))
}
