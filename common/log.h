// Logging: spdlog, one process-wide logger. Daemons call init_logging once
// from main; libraries just log. Messages name the object, path or address.
#pragma once

#include <spdlog/spdlog.h>

#include <string>

#include "common/status.h"

namespace surge {

// level: trace|debug|info|warn|error|off. file: empty for stderr.
Status init_logging(const std::string& level, const std::string& file = "",
                    const std::string& name = "surge");

}  // namespace surge

#define SLOG_TRACE(...) SPDLOG_TRACE(__VA_ARGS__)
#define SLOG_DEBUG(...) ::spdlog::debug(__VA_ARGS__)
#define SLOG_INFO(...) ::spdlog::info(__VA_ARGS__)
#define SLOG_WARN(...) ::spdlog::warn(__VA_ARGS__)
#define SLOG_ERROR(...) ::spdlog::error(__VA_ARGS__)
