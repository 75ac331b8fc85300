// SPDX-License-Identifier: MIT
// What the etcd store and its watch share: a connection to etcd's JSON gateway
// (keys and values travel base64-encoded, 64-bit numbers as strings).
#pragma once

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <curl/curl.h>
#include <openssl/evp.h>

#include <nlohmann/json.hpp>
#include <rdma/fi_errno.h>

#include <fmt/format.h>

#include "weft/base/error.hpp"
#include "weft/stores/etcd_store.hpp"

namespace weft::detail::etcd {

using json = nlohmann::json;

/// Every call's own limit (a wait's deadline is its caller's).
inline constexpr std::chrono::milliseconds call_timeout{10000};

inline std::string b64(std::span<const std::byte> in)
{
    std::string out(4 * ((in.size() + 2) / 3), '\0');
    const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                  reinterpret_cast<const unsigned char*>(in.data()),
                                  static_cast<int>(in.size()));
    out.resize(static_cast<std::size_t>(n));
    return out;
}

inline std::string b64(std::string_view text)
{
    return b64(std::as_bytes(std::span(text.data(), text.size())));
}

inline std::vector<std::byte> unb64(const std::string& in)
{
    std::vector<std::byte> out(3 * (in.size() / 4) + 3);
    const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                  reinterpret_cast<const unsigned char*>(in.data()),
                                  static_cast<int>(in.size()));
    if (n < 0)
        throw Error("etcd", -EPROTO, "", "etcd sent a value that is not base64");
    // EVP_DecodeBlock counts the padding's zero bytes: take them off.
    std::size_t size = static_cast<std::size_t>(n);
    for (auto it = in.rbegin(); it != in.rend() && *it == '='; ++it)
        --size;
    out.resize(size);
    return out;
}

/// The first key after every key that starts with `prefix` (etcd's range_end).
inline std::string prefix_end(std::string prefix)
{
    while (!prefix.empty()) {
        auto& c = reinterpret_cast<unsigned char&>(prefix.back());
        if (c < 0xff) {
            ++c;
            return prefix;
        }
        prefix.pop_back();
    }
    return std::string(1, '\0');
}

inline std::int64_t number(const json& j, const char* field)
{
    if (!j.contains(field))
        return 0;
    const auto& v = j[field];
    return v.is_string() ? std::stoll(v.get<std::string>()) : v.get<std::int64_t>();
}

} // namespace weft::detail::etcd

namespace weft {

using detail::etcd::json;

/// One connection (a curl easy handle, kept alive between requests).
struct EtcdStore::Http {
    CURL* curl = nullptr;
    std::string base;
    std::string body;
    curl_slist* headers = nullptr;

    explicit Http(std::string endpoint) : base("http://" + std::move(endpoint))
    {
        curl = curl_easy_init();
        if (!curl)
            throw Error("curl_easy_init", -FI_ENOMEM, "", "libcurl could not start");
        headers = curl_slist_append(nullptr, "Content-Type: application/json");
        curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
        curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(curl, CURLOPT_TCP_NODELAY, 1L);
        curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, +[](char* p, size_t, size_t n, void* to) {
            static_cast<std::string*>(to)->append(p, n);
            return n;
        });
        curl_easy_setopt(curl, CURLOPT_WRITEDATA, &body);
    }
    ~Http()
    {
        curl_slist_free_all(headers);
        curl_easy_cleanup(curl);
    }
    Http(const Http&) = delete;
    Http& operator=(const Http&) = delete;

    /// POSTs `request` to `path`; etcd's answer, or Error naming what failed.
    json post(const char* path, const json& request, std::chrono::milliseconds timeout)
    {
        const std::string url = base + path;
        const std::string text = request.dump();
        body.clear();
        curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
        curl_easy_setopt(curl, CURLOPT_POSTFIELDS, text.c_str());
        curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE, static_cast<long>(text.size()));
        curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, static_cast<long>(std::max<std::int64_t>(timeout.count(), 1)));
        const CURLcode rc = curl_easy_perform(curl);
        if (rc != CURLE_OK) {
            const int code = rc == CURLE_OPERATION_TIMEDOUT ? -FI_ETIMEDOUT
                             : rc == CURLE_COULDNT_CONNECT ? -FI_ECONNREFUSED
                                                           : -FI_EIO;
            const std::string what = fmt::format("etcd at {} did not answer {}: {}", base, path,
                                                 curl_easy_strerror(rc));
            if (code == -FI_ETIMEDOUT)
                throw TimeoutError("etcd", code, "", what);
            throw Error("etcd", code, "", what);
        }
        long status = 0;
        curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
        // A streamed answer (lease keep-alive) wraps its message in "result".
        json answer = json::parse(body, nullptr, false);
        if (answer.is_discarded() || status != 200)
            throw Error("etcd", -EPROTO, "",
                        fmt::format("etcd at {} answered {} with HTTP {}: {}", base, path, status,
                                    body.substr(0, 200)));
        if (answer.contains("result"))
            answer = answer["result"];
        if (answer.contains("error"))
            throw Error("etcd", -EPROTO, "",
                        fmt::format("etcd at {} refused {}: {}", base, path, answer["error"].dump()));
        return answer;
    }
};

} // namespace weft
