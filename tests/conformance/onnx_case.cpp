// The ONNX Attention conformance data: index.txt (generated from cases.json by
// tests/data/onnx-attention/make_index.py; its README gives the source (onnx/onnx, Apache-2.0),
// the file format and what was changed), the case files, and ONNX's visibility rule.
#include "onnx_case.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace onnx_conformance {

namespace {

std::string data_path(const std::string &file) {
    return std::string(ATTN_ONNX_DATA_DIR) + "/" + file;
}

} // namespace

std::vector<Line> read_index() {
    std::ifstream in(data_path("index.txt"));
    REQUIRE_MESSAGE(in.good(), "cannot open ", data_path("index.txt"));
    std::vector<Line> lines;
    std::string text;
    while (std::getline(in, text)) {
        if (text.empty() || text[0] == '#') continue;
        Line line;
        std::string::size_type r = text.find(" reason=");
        if (r != std::string::npos) {
            line.reason = text.substr(r + 8);
            text.resize(r);
        }
        std::istringstream tokens(text);
        tokens >> line.verb;
        std::string tok;
        while (tokens >> tok) {
            std::string::size_type eq = tok.find('=');
            REQUIRE_MESSAGE(eq != std::string::npos, "index token without '=': ", tok);
            line.kv[tok.substr(0, eq)] = tok.substr(eq + 1);
        }
        REQUIRE_MESSAGE((line.verb == "run" || line.verb == "skip"), "bad index line: ", text);
        REQUIRE_MESSAGE(line.kv.count("name"), "index line without name: ", text);
        lines.push_back(line);
    }
    return lines;
}

std::string get(const Line &l, const char *key) {
    auto it = l.kv.find(key);
    REQUIRE_MESSAGE(it != l.kv.end(), l.kv.at("name"), ": index has no ", key);
    return it->second;
}

namespace {

long long parse_int(const Line &l, const char *key, const std::string &s) {
    char *end = nullptr;
    long long v = std::strtoll(s.c_str(), &end, 10);
    REQUIRE_MESSAGE((!s.empty() && *end == '\0'), l.kv.at("name"), ": bad ", key, "=", s);
    return v;
}

size_t get_size(const Line &l, const char *key) {
    long long v = parse_int(l, key, get(l, key));
    REQUIRE_MESSAGE(v >= 0, l.kv.at("name"), ": negative ", key);
    return static_cast<size_t>(v);
}

// A comma-separated integer list; "-" is empty.
std::vector<long long> get_ints(const Line &l, const char *key) {
    std::string s = get(l, key);
    std::vector<long long> v;
    if (s == "-") return v;
    std::string::size_type pos = 0;
    while (true) {
        std::string::size_type c = s.find(',', pos);
        v.push_back(parse_int(l, key, s.substr(pos, c == std::string::npos ? c : c - pos)));
        if (c == std::string::npos) break;
        pos = c + 1;
    }
    return v;
}

// Reads a whole file; its size must be exactly `count` elements of T.
template <class T> std::vector<T> read_exact(const std::string &file, size_t count) {
    std::ifstream in(data_path(file), std::ios::binary | std::ios::ate);
    REQUIRE_MESSAGE(in.good(), "cannot open ", data_path(file));
    std::streamoff bytes = in.tellg();
    REQUIRE_MESSAGE(bytes == static_cast<std::streamoff>(count * sizeof(T)), file, " holds ", bytes,
                    " bytes, expected ", count * sizeof(T));
    std::vector<T> v(count);
    in.seekg(0);
    in.read(reinterpret_cast<char *>(v.data()), static_cast<std::streamsize>(bytes));
    REQUIRE(in.good());
    return v;
}

} // namespace

Case load_case(const Line &l) {
    Case c;
    c.name = get(l, "name");
    c.opset = static_cast<int>(get_size(l, "opset"));
    c.layout = get(l, "layout");
    c.dtype = get(l, "dtype");
    c.B = get_size(l, "batch");
    c.Hq = get_size(l, "heads_q");
    c.Hkv = get_size(l, "heads_kv");
    c.Sq = get_size(l, "seq_q");
    c.Sk = get_size(l, "seq_k");
    c.D = get_size(l, "head_dim");
    c.Dv = get_size(l, "head_dim_v");
    c.past = get_size(l, "past_seq");
    c.causal = get(l, "causal");
    c.features = get(l, "features");
    REQUIRE_MESSAGE((c.layout == "BHSD" || c.layout == "BSHD"), c.name, ": layout ", c.layout);
    REQUIRE_MESSAGE((c.dtype == "float32" || c.dtype == "float16"), c.name, ": dtype ", c.dtype);
    REQUIRE_MESSAGE((c.causal == "none" || c.causal == "top_left" || c.causal == "bottom_right" ||
                     c.causal == "offset"),
                    c.name, ": causal ", c.causal);

    std::vector<long long> off = get_ints(l, "causal_offset");
    if (c.causal != "none") {
        if (c.causal == "top_left") off.assign(1, 0);
        if (c.causal == "bottom_right")
            off.assign(1, static_cast<long long>(c.Sk) - static_cast<long long>(c.Sq));
        REQUIRE_MESSAGE((off.size() == 1 || off.size() == c.B), c.name, ": causal_offset");
        c.offset.assign(c.B, off[0]);
        if (off.size() == c.B) c.offset = off;
    }
    std::string scale = get(l, "scale");
    c.default_scale = scale == "default";
    c.scale = c.default_scale ? 0.0f : std::strtof(scale.c_str(), nullptr);
    std::string softcap = get(l, "softcap");
    c.softcap = softcap == "-" ? 0.0 : std::strtod(softcap.c_str(), nullptr);
    for (long long n : get_ints(l, "nonpad_kv_seqlen")) c.nonpad.push_back(static_cast<int32_t>(n));
    REQUIRE_MESSAGE((c.nonpad.empty() || c.nonpad.size() == c.B), c.name, ": nonpad_kv_seqlen");
    std::vector<long long> sp = get_ints(l, "softmax_precision");
    if (!sp.empty()) c.softmax_precision = sp[0];
    std::string qk = get(l, "qk_mode");
    c.qk_mode = qk == "-" ? -1 : static_cast<int>(parse_int(l, "qk_mode", qk));
    REQUIRE_MESSAGE((c.qk_mode >= -1 && c.qk_mode <= 3), c.name, ": qk_mode ", qk);
    c.fully_masked_rows = get_size(l, "fully_masked_rows");

    c.mask_kind = get(l, "mask");
    REQUIRE_MESSAGE((c.mask_kind == "-" || c.mask_kind == "bool" || c.mask_kind == "additive"),
                    c.name, ": mask ", c.mask_kind);
    size_t mask_elems = 0;
    if (c.mask_kind != "-") {
        std::vector<long long> shape = get_ints(l, "mask_shape");
        REQUIRE_MESSAGE((!shape.empty() && shape.size() <= 4), c.name, ": mask_shape");
        const size_t full[4] = {c.B, c.Hq, c.Sq, c.Sk};
        mask_elems = 1;
        for (size_t a = 0; a < shape.size(); ++a) {
            const size_t ax = 4 - shape.size() + a;
            c.mdim[ax] = static_cast<size_t>(shape[a]);
            mask_elems *= c.mdim[ax];
            // Right-aligned broadcast; the key axis may be shorter (ONNX pads it as masked).
            const bool ok = ax == 3 ? (c.mdim[ax] >= 1 && c.mdim[ax] <= c.Sk)
                                    : (c.mdim[ax] == 1 || c.mdim[ax] == full[ax]);
            REQUIRE_MESSAGE(ok, c.name, ": mask axis ", ax, " of size ", c.mdim[ax],
                            " does not broadcast to ", full[ax]);
        }
    }

    c.q = read_exact<float>(c.name + ".q.f32", c.B * c.Hq * c.Sq * c.D);
    c.k = read_exact<float>(c.name + ".k.f32", c.B * c.Hkv * c.Sk * c.D);
    c.v = read_exact<float>(c.name + ".v.f32", c.B * c.Hkv * c.Sk * c.Dv);
    c.out = read_exact<float>(c.name + ".out.f32", c.B * c.Hq * c.Sq * c.Dv);
    if (c.mask_kind == "bool") c.mask_u8 = read_exact<uint8_t>(c.name + ".mask.u8", mask_elems);
    if (c.mask_kind == "additive") c.mask_f32 = read_exact<float>(c.name + ".mask.f32", mask_elems);
    if (c.qk_mode >= 0) c.qk = read_exact<float>(c.name + ".qk.f32", c.B * c.Hq * c.Sq * c.Sk);
    return c;
}

// Index of mask element (b, h, i, j) in the file; j must be < mdim[3].
size_t mask_index(const Case &c, size_t b, size_t h, size_t i, size_t j) {
    const size_t *m = c.mdim;
    return (((m[0] > 1 ? b : 0) * m[1] + (m[1] > 1 ? h : 0)) * m[2] + (m[2] > 1 ? i : 0)) * m[3] +
           j;
}

// ONNX's rule, independent of the library: may query i of (b, h) see key j?
bool visible(const Case &c, size_t b, size_t h, size_t i, size_t j) {
    if (!c.offset.empty() && static_cast<long long>(j) > static_cast<long long>(i) + c.offset[b])
        return false;
    if (!c.nonpad.empty() && static_cast<long long>(j) >= c.nonpad[b]) return false;
    if (c.mask_kind != "-") {
        if (j >= c.mdim[3]) return false; // padded key axis
        const size_t n = mask_index(c, b, h, i, j);
        if (c.mask_kind == "bool" && c.mask_u8[n] == 0) return false;
        if (c.mask_kind == "additive" && std::isinf(c.mask_f32[n]) && c.mask_f32[n] < 0)
            return false;
    }
    return true;
}

} // namespace onnx_conformance
