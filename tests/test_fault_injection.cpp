// The failure model (docs/testing.md): a failure injected at each place one
// can happen — a prefill chunk, a decode step, forward-pass working memory, a
// KV block — reaches the caller as an error (never as `cancelled`), leaves
// the session empty, and the next request gives a fresh session's output bit
// for bit. Sliding-window and recurrent-state families too, whose caches roll
// back differently. The scheduler's side is in test_server_scheduler.cpp,
// the HTTP server's in tests/server/faults.test.mjs.
#include <gtest/gtest.h>

#include <cstdlib>
#include <new>

#include "base/error.hpp"
#include "base/fault_injection.hpp"
#include "engine_test_models.hpp"
#include "test_support.hpp"

namespace cortiq {
namespace {

// Disarms whatever a test armed, pass or fail.
struct Disarm {
  ~Disarm() { fault::disarm(); }
};

TEST(FaultInjection, FailsOnlyTheNthArrival) {
  const Disarm disarm;
  EXPECT_FALSE(fault::due(fault::Site::decode));  // nothing armed
  fault::arm(fault::Site::decode, 3);
  EXPECT_FALSE(fault::due(fault::Site::prefill));  // other sites stay quiet
  EXPECT_FALSE(fault::due(fault::Site::decode));
  EXPECT_FALSE(fault::due(fault::Site::decode));
  EXPECT_TRUE(fault::due(fault::Site::decode));
  EXPECT_FALSE(fault::due(fault::Site::decode));
  fault::arm(fault::Site::alloc, 1);
  EXPECT_THROW(fault::hit(fault::Site::alloc), std::bad_alloc);
  fault::arm(fault::Site::kv_block, 1);
  try {
    fault::hit(fault::Site::kv_block);
    ADD_FAILURE() << "no fault";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "injected fault: kv_block");
  }
  fault::disarm();
  fault::arm(fault::Site::decode, 1);
  fault::disarm();
  EXPECT_FALSE(fault::due(fault::Site::decode));
}

TEST(FaultInjection, SpecsArmSitesAndNameWhatTheyCannotRead) {
  const Disarm disarm;
  fault::arm_from_spec("decode:2,client_write:1");
  EXPECT_TRUE(fault::due(fault::Site::client_write));
  EXPECT_FALSE(fault::due(fault::Site::decode));
  EXPECT_TRUE(fault::due(fault::Site::decode));
  for (const char* bad :
       {"decode", "decode:", "decode:0", "decode:-1", "decode:2x", "write:1", ":3", "decode:1,,"}) {
    try {
      fault::arm_from_spec(bad);
      ADD_FAILURE() << bad << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find('\''), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(fault::arm(fault::Site::decode, 0), Error);
}

struct SessionFault {
  const char* arch;
  fault::Site site;
  int64_t nth;
};

void PrintTo(const SessionFault& f, std::ostream* os) {
  *os << f.arch << ", " << fault::site_name(f.site) << ":" << f.nth;
}

std::string name_of(const testing::TestParamInfo<SessionFault>& info) {
  return std::string(info.param.arch) + "_" + std::string(fault::site_name(info.param.site)) + "_" +
         std::to_string(info.param.nth);
}

class SessionFaults : public testing::TestWithParam<SessionFault> {
 protected:
  // Chunks of 8 rows: a 30-token prompt is four prefill passes.
  std::shared_ptr<const Model> model() const {
    test::TestModelSpec spec;
    spec.arch = GetParam().arch;
    return test::load_test_model(spec, 2, KvType::f16, /*chunk=*/8);
  }
};

using test::prompt_of;

// Greedy, with each token's confidence (its computation meets the faults too).
GenerateOptions greedy(int64_t max_tokens) {
  GenerateOptions options = test::greedy(max_tokens);
  options.confidence = true;
  return options;
}

// What must be equal bit for bit: the tokens and each one's probability.
struct Output {
  std::vector<TokenId> tokens;
  std::vector<float> confidence;
  bool operator==(const Output&) const = default;
};

Output output_of(const GenerateResult& r) {
  EXPECT_NE(r.finish_reason, FinishReason::cancelled);
  return {r.tokens, r.confidence};
}

// The fault strikes the first turn, or the second after a first that went
// well (its prefix reused); either way the error reaches the caller, the
// session is left empty, and both turns then give a fresh session's output.
TEST_P(SessionFaults, ErrorReachesTheCallerAndTheNextRequestRunsAsOnAFreshSession) {
  const Disarm disarm;
  const auto m = model();
  const auto turn1 = prompt_of(30, 1);
  auto turn2 = turn1;
  for (const TokenId id : prompt_of(12, 2)) turn2.push_back(id);
  Output fresh1, fresh2;
  {
    Session fresh(m);
    fresh1 = output_of(fresh.generate(std::span<const TokenId>(turn1), greedy(20)));
    Session other(m);
    fresh2 = output_of(other.generate(std::span<const TokenId>(turn2), greedy(20)));
  }
  for (const bool in_second_turn : {false, true}) {
    SCOPED_TRACE(in_second_turn ? "fault in the second turn" : "fault in the first turn");
    Session session(m);
    const auto& failing = in_second_turn ? turn2 : turn1;
    if (in_second_turn) {
      EXPECT_EQ(output_of(session.generate(std::span<const TokenId>(turn1), greedy(20))), fresh1);
    }
    fault::arm(GetParam().site, GetParam().nth);
    bool failed = false;
    try {
      session.generate(std::span<const TokenId>(failing), greedy(20));
    } catch (const std::bad_alloc&) {
      failed = GetParam().site == fault::Site::alloc;
    } catch (const Error& e) {
      failed = std::string(e.what()) ==
               "injected fault: " + std::string(fault::site_name(GetParam().site));
    }
    EXPECT_TRUE(failed) << "the injected fault did not reach the caller as itself";
    fault::disarm();
    EXPECT_TRUE(session.history().empty());
    EXPECT_EQ(session.cache_rows(), 0);
    EXPECT_EQ(output_of(session.generate(std::span<const TokenId>(turn1), greedy(20))), fresh1);
    EXPECT_EQ(output_of(session.generate(std::span<const TokenId>(turn2), greedy(20))), fresh2);
  }
}

// Scoring too: evaluate() reports the fault, not a cancellation, and the
// logits that follow are a fresh session's.
TEST_P(SessionFaults, EvaluateReportsTheFaultAndScoresAsAFreshSessionAfter) {
  const Disarm disarm;
  const auto m = model();
  const auto ids = prompt_of(40, 3);
  std::vector<float> fresh;
  {
    Session session(m);
    fresh = session.evaluate(ids);
  }
  Session session(m);
  fault::arm(GetParam().site, GetParam().nth);
  std::string message;
  try {
    session.evaluate(ids);
  } catch (const std::exception& e) {
    message = describe(e);
  }
  fault::disarm();
  if (GetParam().site == fault::Site::decode) {
    EXPECT_TRUE(message.empty()) << "scoring runs no decode step: " << message;
  } else {
    EXPECT_FALSE(message.empty()) << "no error reached the caller";
    EXPECT_EQ(message.find("cancel"), std::string::npos) << message;
  }
  if (!message.empty()) {
    EXPECT_TRUE(session.history().empty());
  }
  session.reset();
  EXPECT_EQ(session.evaluate(ids), fresh);
}

// Each arrival is reached in either turn (the second forwards only 12
// prompt tokens after the reused 30): prefill:2 is the second chunk,
// decode:3 the third step, alloc:N lands in the middle of a pass, kv_block:2
// takes the block of positions 16..31 (32..47 in the second turn).
INSTANTIATE_TEST_SUITE_P(Families, SessionFaults,
                         testing::Values(SessionFault{"llama", fault::Site::prefill, 2},
                                         SessionFault{"llama", fault::Site::decode, 3},
                                         SessionFault{"llama", fault::Site::alloc, 40},
                                         SessionFault{"llama", fault::Site::kv_block, 2},
                                         SessionFault{"gemma2", fault::Site::prefill, 3},
                                         SessionFault{"gemma2", fault::Site::decode, 5},
                                         SessionFault{"gemma2", fault::Site::kv_block, 3},
                                         SessionFault{"mamba2", fault::Site::prefill, 2},
                                         SessionFault{"mamba2", fault::Site::decode, 3},
                                         SessionFault{"lfm2", fault::Site::prefill, 2},
                                         SessionFault{"lfm2", fault::Site::decode, 2},
                                         SessionFault{"lfm2", fault::Site::alloc, 25}),
                         name_of);

// The command line: the error and exit status 1, whatever the site; an
// unreadable CORTIQ_FAULT stops the process before it starts.
TEST(FaultInjection, CliReportsTheFaultAndExitsWithStatusOne) {
  const auto model = test::test_model_path({.arch = "llama"}).string();
  const std::string run = "run -m " + model + " -p 'Hello there' -n 12 --temp 0 --ignore-eos";
  struct Case {
    const char* spec;
    const char* message;
  };
  for (const Case c : {Case{"prefill:1", "cortiq run: error: injected fault: prefill"},
                       Case{"decode:4", "cortiq run: error: injected fault: decode"},
                       Case{"alloc:10", "cortiq run: error: out of memory"},
                       Case{"kv_block:1", "cortiq run: error: injected fault: kv_block"}}) {
    ::setenv("CORTIQ_FAULT", c.spec, 1);
    std::string out;
    const int status = test::run_cli(run, &out);
    ::unsetenv("CORTIQ_FAULT");
    EXPECT_EQ(status, 1) << c.spec << ": " << out;
    EXPECT_NE(out.find(c.message), std::string::npos) << c.spec << ": " << out;
  }
  ::setenv("CORTIQ_FAULT", "decode:zero", 1);
  std::string out;
  const int status = test::run_cli(run, &out);
  ::unsetenv("CORTIQ_FAULT");
  EXPECT_EQ(status, 2) << out;
  EXPECT_NE(out.find("CORTIQ_FAULT: 'decode:zero'"), std::string::npos) << out;
}

}  // namespace
}  // namespace cortiq
