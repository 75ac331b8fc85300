// Lesson 6: the KV node's client. A GET is one RMA read of the key's slot in the server's
// memory (the server's CPU takes no part); a copy torn by a concurrent PUT is read again.
// PUT and DELETE are requests the server applies. Start weft-kv-server first; run:
//   weft-kv-client HOST:PORT put KEY VALUE | get KEY | del KEY
#include "kv_client.hpp"

#include <iostream>
#include <string>

using namespace std::chrono_literals;

int main(int argc, char** argv)
try {
    const std::string op = argc > 3 ? argv[2] : "";
    if (!((op == "get" || op == "del") && argc == 4) && !(op == "put" && argc == 5)) {
        std::cerr << "usage: " << argv[0] << " HOST:PORT put KEY VALUE | get KEY | del KEY\n";
        return 2;
    }
    const auto soon = [] { return weft::Deadline::after(10s); };
    kv::Client kv(argv[1], soon());
    const std::string key = argv[3];
    if (op == "get") {
        const auto value = kv.get(key, soon());
        if (!value) {
            std::cout << key << ": not found" << std::endl;
            return 3;
        }
        std::cout << key << " = " << std::string(reinterpret_cast<const char*>(value->data()),
                                                 value->size()) << std::endl;
        return 0;
    }
    const kv::Status s = op == "put" ? kv.put(key, std::as_bytes(std::span(std::string_view(argv[4]))), soon())
                                     : kv.erase(key, soon());
    std::cout << op << " " << key << ": " << kv::to_string(s) << std::endl;
    return s == kv::Status::ok ? 0 : 3;
} catch (const std::exception& e) {
    std::cerr << argv[0] << ": " << e.what() << "\n";
    return 1;
}
