// See records.hpp.
#include "records.hpp"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace attn_bench {

std::string json_string(const std::string &s) {
    std::string r = "\"";
    for (char c : s) {
        if (c == '"' || c == '\\') {
            r += '\\';
            r += c;
        } else if (static_cast<unsigned char>(c) < 0x20) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\u%04x", c);
            r += buf;
        } else {
            r += c;
        }
    }
    return r + "\"";
}

std::string json_number(double x) {
    if (!std::isfinite(x)) return "null";
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.6g", x);
    return buf;
}

Record &Record::raw(const std::string &k, const std::string &v) {
    for (auto &p : kv)
        if (p.first == k) {
            p.second = v;
            return *this;
        }
    kv.emplace_back(k, v);
    return *this;
}

Record &Record::append(const Record &other) {
    for (auto &p : other.kv) raw(p.first, p.second);
    return *this;
}

const std::string *Record::find(const std::string &k) const {
    for (auto &p : kv)
        if (p.first == k) return &p.second;
    return nullptr;
}

double Record::get_num(const std::string &k) const {
    const std::string *v = find(k);
    return v && *v != "null" ? std::atof(v->c_str()) : NAN;
}

std::string Record::get_str(const std::string &k) const {
    const std::string *v = find(k);
    if (!v || v->size() < 2 || (*v)[0] != '"') return v ? *v : "";
    std::string s = v->substr(1, v->size() - 2), r;
    for (size_t i = 0; i < s.size(); ++i) {
        if (s[i] == '\\' && i + 5 < s.size() + 0 && s[i + 1] == 'u') {
            r += static_cast<char>(std::strtol(s.substr(i + 2, 4).c_str(), nullptr, 16));
            i += 5;
        } else if (s[i] == '\\' && i + 1 < s.size()) {
            r += s[++i];
        } else {
            r += s[i];
        }
    }
    return r;
}

std::string Record::json() const {
    std::string r = "{";
    for (size_t i = 0; i < kv.size(); ++i)
        r += (i ? ", " : "") + json_string(kv[i].first) + ": " + kv[i].second;
    return r + "}";
}

std::string Record::line() const {
    std::string r;
    for (size_t i = 0; i < kv.size(); ++i) {
        std::string v = kv[i].second; // JSON text: spaces occur only inside strings
        for (size_t p = v.find(' '); p != std::string::npos; p = v.find(' ', p))
            v.replace(p, 1, "\\u0020");
        r += (i ? " " : "") + kv[i].first + "=" + v;
    }
    return r;
}

Record Record::parse_line(const std::string &line) {
    Record r;
    std::istringstream in(line);
    std::string tok;
    while (in >> tok) {
        const size_t eq = tok.find('=');
        if (eq != std::string::npos) r.raw(tok.substr(0, eq), tok.substr(eq + 1));
    }
    return r;
}

std::vector<Record> &Results::section(const std::string &name) {
    for (auto &s : sections)
        if (s.first == name) return s.second;
    sections.emplace_back(name, std::vector<Record>{});
    return sections.back().second;
}

const Record *Results::find(const std::string &name,
                            const std::function<bool(const Record &)> &pred) const {
    for (auto &s : sections)
        if (s.first == name)
            for (auto &r : s.second)
                if (pred(r)) return &r;
    return nullptr;
}

bool Results::write_json(const std::string &path) const {
    std::ofstream f(path);
    if (!f) return false;
    f << "{\n  \"machine\": " << machine.json();
    for (auto &s : sections) {
        f << ",\n  " << json_string(s.first) << ": [";
        for (size_t i = 0; i < s.second.size(); ++i)
            f << (i ? ",\n    " : "\n    ") << s.second[i].json();
        f << (s.second.empty() ? "]" : "\n  ]");
    }
    f << "\n}\n";
    return static_cast<bool>(f);
}

} // namespace attn_bench
