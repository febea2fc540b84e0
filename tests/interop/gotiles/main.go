// Command gotiles follows a memseal log served as C2SP tlog-tiles with nothing
// but Go's golang.org/x/mod/sumdb/note and golang.org/x/mod/sumdb/tlog, which
// no one on the memseal project wrote.
//
// It reads one JSON object on stdin:
//
//	{"base": URL_OR_DIR, "vkeys": [VKEY, ...], "old": CHECKPOINT (optional),
//	 "sample": [INDEX, ...], "token": BEARER (optional)}
//
// and writes one JSON result on stdout:
//
//	{"ok": true, "size": N, "root": B64, "proved": K, "consistent": true|false}
//	{"ok": false, "error": "..."}
//
// Steps: fetch <base>/checkpoint and open it with note.Open under the vkeys;
// read hash tiles through tlog.TileHashReader with height 8 (the reader checks
// every tile it reads against the checkpoint's root); for every sampled index,
// take the entry's bytes from its entry bundle (big-endian uint16 length
// prefixes), hash them with tlog.RecordHash and check tlog.ProveRecord's proof
// with tlog.CheckRecord; given an older checkpoint, check tlog.ProveTree's
// proof with tlog.CheckTree. base is an http(s) URL (the service's /tlog) or a
// folder `memseal tiles` wrote.
//
// Build it offline from Debian's golang-golang-x-mod-dev in GOPATH mode:
//
//	GO111MODULE=off GOPATH=/usr/share/gocode go build -o gotiles .
package main

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

const height = 8

type input struct {
	Base   string   `json:"base"`
	Vkeys  []string `json:"vkeys"`
	Old    string   `json:"old"`
	Sample []int64  `json:"sample"`
	Token  string   `json:"token"`
}

type result struct {
	OK         bool   `json:"ok"`
	Error      string `json:"error,omitempty"`
	Size       int64  `json:"size"`
	Root       string `json:"root,omitempty"`
	Proved     int    `json:"proved"`
	Consistent bool   `json:"consistent"`
}

// source reads a file of the tiled log by its path below the prefix.
type source struct {
	base   string
	token  string
	client *http.Client
}

func (s *source) get(path string) ([]byte, error) {
	if !strings.HasPrefix(s.base, "http://") && !strings.HasPrefix(s.base, "https://") {
		return os.ReadFile(filepath.Join(s.base, filepath.FromSlash(path)))
	}
	req, err := http.NewRequest("GET", strings.TrimSuffix(s.base, "/")+"/"+path, nil)
	if err != nil {
		return nil, err
	}
	if s.token != "" {
		req.Header.Set("Authorization", "Bearer "+s.token)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	return io.ReadAll(resp.Body)
}

// indexPath writes a tile index as the C2SP spec asks: 3-digit groups, each
// but the last prefixed with x.
func indexPath(n int64) string {
	out := fmt.Sprintf("%03d", n%1000)
	for n >= 1000 {
		n /= 1000
		out = fmt.Sprintf("x%03d/%s", n%1000, out)
	}
	return out
}

// c2spPath names a tile as tlog-tiles does. tlog.Tile.Path is the Go checksum
// database's layout, which puts the height in the path; tlog-tiles does not.
func c2spPath(t tlog.Tile) string {
	p := "tile/" + strconv.Itoa(t.L) + "/" + indexPath(t.N)
	if t.W != 1<<height {
		p += ".p/" + strconv.Itoa(t.W)
	}
	return p
}

type tileReader struct{ src *source }

func (r tileReader) Height() int { return height }

func (r tileReader) ReadTiles(tiles []tlog.Tile) ([][]byte, error) {
	out := make([][]byte, len(tiles))
	for i, t := range tiles {
		data, err := r.src.get(c2spPath(t))
		if err != nil {
			return nil, err
		}
		out[i] = data
	}
	return out, nil
}

func (r tileReader) SaveTiles(tiles []tlog.Tile, data [][]byte) {}

// openCheckpoint opens a signed checkpoint note and parses its body
// (origin, size, base64 root).
func openCheckpoint(text string, verifiers note.Verifiers) (tlog.Tree, error) {
	n, err := note.Open([]byte(text), verifiers)
	if err != nil {
		return tlog.Tree{}, err
	}
	lines := strings.Split(n.Text, "\n")
	if len(lines) < 4 {
		return tlog.Tree{}, errors.New("checkpoint has fewer than three lines")
	}
	size, err := strconv.ParseInt(lines[1], 10, 64)
	if err != nil || size < 0 {
		return tlog.Tree{}, fmt.Errorf("checkpoint size %q", lines[1])
	}
	root, err := base64.StdEncoding.DecodeString(lines[2])
	if err != nil || len(root) != tlog.HashSize {
		return tlog.Tree{}, fmt.Errorf("checkpoint root %q", lines[2])
	}
	var h tlog.Hash
	copy(h[:], root)
	return tlog.Tree{N: size, Hash: h}, nil
}

// entry returns the bytes of entry index from its bundle in the tree of size.
func entry(src *source, index, size int64) ([]byte, error) {
	bundle := index >> height
	path := "tile/entries/" + indexPath(bundle)
	width := int64(1 << height)
	if (bundle+1)<<height > size {
		width = size - bundle<<height
		path += ".p/" + strconv.FormatInt(width, 10)
	}
	data, err := src.get(path)
	if err != nil {
		return nil, err
	}
	var found []byte
	var count int64
	for len(data) > 0 {
		if len(data) < 2 {
			return nil, errors.New("bundle ends inside a length")
		}
		n := int(binary.BigEndian.Uint16(data))
		if len(data) < 2+n {
			return nil, errors.New("bundle entry runs past the end")
		}
		if count == index-bundle<<height {
			found = data[2 : 2+n]
		}
		data = data[2+n:]
		count++
	}
	if count != width || found == nil {
		return nil, fmt.Errorf("bundle %s holds %d entries, want %d", path, count, width)
	}
	return found, nil
}

func run(in input) (result, error) {
	var verifiers []note.Verifier
	for _, vkey := range in.Vkeys {
		v, err := note.NewVerifier(vkey)
		if err != nil {
			return result{}, err
		}
		verifiers = append(verifiers, v)
	}
	list := note.VerifierList(verifiers...)
	src := &source{base: in.Base, token: in.Token, client: &http.Client{Timeout: 60 * time.Second}}
	text, err := src.get("checkpoint")
	if err != nil {
		return result{}, err
	}
	tree, err := openCheckpoint(string(text), list)
	if err != nil {
		return result{}, err
	}
	hashes := tlog.TileHashReader(tree, tileReader{src})
	if got, err := tlog.TreeHash(tree.N, hashes); err != nil || got != tree.Hash {
		return result{}, fmt.Errorf("tree hash from the tiles: %v", err)
	}
	out := result{OK: true, Size: tree.N, Root: base64.StdEncoding.EncodeToString(tree.Hash[:])}
	for _, index := range in.Sample {
		leaf, err := entry(src, index, tree.N)
		if err != nil {
			return result{}, fmt.Errorf("entry %d: %v", index, err)
		}
		proof, err := tlog.ProveRecord(tree.N, index, hashes)
		if err != nil {
			return result{}, fmt.Errorf("prove entry %d: %v", index, err)
		}
		if err := tlog.CheckRecord(proof, tree.N, tree.Hash, index, tlog.RecordHash(leaf)); err != nil {
			return result{}, fmt.Errorf("entry %d: %v", index, err)
		}
		out.Proved++
	}
	if in.Old != "" {
		old, err := openCheckpoint(in.Old, list)
		if err != nil {
			return result{}, fmt.Errorf("old checkpoint: %v", err)
		}
		proof, err := tlog.ProveTree(tree.N, old.N, hashes)
		if err != nil {
			return result{}, fmt.Errorf("prove consistency: %v", err)
		}
		if err := tlog.CheckTree(proof, tree.N, tree.Hash, old.N, old.Hash); err != nil {
			return result{}, fmt.Errorf("consistency: %v", err)
		}
		out.Consistent = true
	}
	return out, nil
}

func main() {
	var in input
	dec := json.NewDecoder(os.Stdin)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		fmt.Fprintln(os.Stderr, "gotiles:", err)
		os.Exit(2)
	}
	out, err := run(in)
	if err != nil {
		out = result{OK: false, Error: err.Error()}
	}
	if err := json.NewEncoder(os.Stdout).Encode(out); err != nil {
		os.Exit(2)
	}
}
