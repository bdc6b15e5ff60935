// The results of a run. A record is an ordered list of key -> JSON-encoded value. It prints as a
// JSON object, and as one line of key=value tokens (how child processes hand their figures back).
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace attn_bench {

std::string json_string(const std::string &s);
std::string json_number(double x); // "null" when not finite

struct Record {
    std::vector<std::pair<std::string, std::string>> kv;

    Record &str(const std::string &k, const std::string &v) { return raw(k, json_string(v)); }
    Record &num(const std::string &k, double v) { return raw(k, json_number(v)); }
    Record &integer(const std::string &k, long long v) { return raw(k, std::to_string(v)); }
    Record &boolean(const std::string &k, bool v) { return raw(k, v ? "true" : "false"); }
    Record &raw(const std::string &k, const std::string &v); // replaces an existing key in place
    Record &append(const Record &other);                     // raw() of each of its keys, in order
    const std::string *find(const std::string &k) const;     // the JSON text, or null
    double get_num(const std::string &k) const;              // NaN when absent or null
    std::string get_str(const std::string &k) const;         // decoded
    std::string json() const;
    std::string line() const;
    static Record parse_line(const std::string &line);
};

// All results, by section, in the order sections were first written.
struct Results {
    Record machine;
    std::vector<std::pair<std::string, std::vector<Record>>> sections;

    std::vector<Record> &section(const std::string &name);
    void add(const std::string &name, const Record &r) { section(name).push_back(r); }
    const Record *find(const std::string &name,
                       const std::function<bool(const Record &)> &pred) const;
    bool write_json(const std::string &path) const;
};

} // namespace attn_bench
