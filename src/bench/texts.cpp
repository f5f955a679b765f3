#include "bench/texts.h"

#include <fmt/format.h>

#include <array>
#include <cctype>
#include <random>
#include <string_view>

#include "core/error.h"

namespace reprise::bench {

namespace {

// The table from vLLM's automatic prefix caching example, as in /work/shared/seeds/001_*.txt.
constexpr std::string_view kSeedRows[] = {
    "| 1 | John Doe | 29 | Engineer | USA | john.doe@example.com | 555-1234 | 123 Elm St, "
    "Springfield, IL |",
    "| 2 | Jane Smith | 34 | Doctor | Canada | jane.smith@example.com | 555-5678 | 456 Oak St, "
    "Toronto, ON |",
    "| 3 | Alice Johnson | 27 | Teacher | UK | alice.j@example.com | 555-8765 | 789 Pine St, "
    "London, UK |",
    "| 4 | Bob Brown | 45 | Artist | Australia | bob.b@example.com | 555-4321 | 321 Maple St, "
    "Sydney, NSW |",
    "| 5 | Carol White | 31 | Scientist | New Zealand | carol.w@example.com | 555-6789 | 654 Birch "
    "St, Wellington, NZ |",
    "| 6 | Dave Green | 28 | Lawyer | Ireland | dave.g@example.com | 555-3456 | 987 Cedar St, "
    "Dublin, IE |",
    "| 7 | Emma Black | 40 | Musician | USA | emma.b@example.com | 555-1111 | 246 Ash St, New "
    "York, NY |",
    "| 8 | Frank Blue | 37 | Chef | Canada | frank.b@example.com | 555-2222 | 135 Spruce St, "
    "Vancouver, BC |",
    "| 9 | Grace Yellow | 50 | Engineer | UK | grace.y@example.com | 555-3333 | 864 Fir St, "
    "Manchester, UK |",
    "| 10 | Henry Violet | 32 | Artist | Australia | henry.v@example.com | 555-4444 | 753 Willow "
    "St, Melbourne, VIC|",
    "| 11 | Irene Orange | 26 | Scientist | New Zealand | irene.o@example.com | 555-5555 | 912 "
    "Poplar St, Auckland, NZ |",
    "| 12 | Jack Indigo | 38 | Teacher | Ireland | jack.i@example.com | 555-6666 | 159 Elm St, "
    "Cork, IE |",
    "| 13 | Karen Red | 41 | Lawyer | USA | karen.r@example.com | 555-7777 | 357 Cedar St, Boston, "
    "MA |",
    "| 14 | Leo Brown | 30 | Chef | Canada | leo.b@example.com | 555-8888 | 246 Oak St, Calgary, "
    "AB |",
    "| 15 | Mia Green | 33 | Musician | UK | mia.g@example.com | 555-9999 | 975 Pine St, "
    "Edinburgh, UK |",
    "| 16 | Noah Yellow | 29 | Doctor | Australia | noah.y@example.com | 555-0000 | 864 Birch St, "
    "Brisbane, QLD |",
    "| 17 | Olivia Blue | 35 | Engineer | New Zealand | olivia.b@example.com | 555-1212 | 753 "
    "Maple St, Hamilton, NZ |",
    "| 18 | Peter Black | 42 | Artist | Ireland | peter.b@example.com | 555-3434 | 912 Fir St, "
    "Limerick, IE |",
    "| 19 | Quinn White | 28 | Scientist | USA | quinn.w@example.com | 555-5656 | 159 Willow St, "
    "Seattle, WA |",
    "| 20 | Rachel Red | 31 | Teacher | Canada | rachel.r@example.com | 555-7878 | 357 Poplar St, "
    "Ottawa, ON |",
    "| 21 | Steve Green | 44 | Lawyer | UK | steve.g@example.com | 555-9090 | 753 Elm St, "
    "Birmingham, UK |",
    "| 22 | Tina Blue | 36 | Musician | Australia | tina.b@example.com | 555-1213 | 864 Cedar St, "
    "Perth, WA |",
    "| 23 | Umar Black | 39 | Chef | New Zealand | umar.b@example.com | 555-3435 | 975 Spruce St, "
    "Christchurch, NZ|",
    "| 24 | Victor Yellow | 43 | Engineer | Ireland | victor.y@example.com | 555-5657 | 246 Willow "
    "St, Galway, IE |",
    "| 25 | Wendy Orange | 27 | Artist | USA | wendy.o@example.com | 555-7879 | 135 Elm St, "
    "Denver, CO |",
    "| 26 | Xavier Green | 34 | Scientist | Canada | xavier.g@example.com | 555-9091 | 357 Oak St, "
    "Montreal, QC |",
    "| 27 | Yara Red | 41 | Teacher | UK | yara.r@example.com | 555-1214 | 975 Pine St, Leeds, UK "
    "|",
    "| 28 | Zack Blue | 30 | Lawyer | Australia | zack.b@example.com | 555-3436 | 135 Birch St, "
    "Adelaide, SA |",
    "| 29 | Amy White | 33 | Musician | New Zealand | amy.w@example.com | 555-5658 | 159 Maple St, "
    "Wellington, NZ |",
    "| 30 | Ben Black | 38 | Chef | Ireland | ben.b@example.com | 555-7870 | 246 Fir St, "
    "Waterford, IE |",
};
constexpr int kSeedRowCount = static_cast<int>(std::size(kSeedRows));

constexpr std::array<std::string_view, 26> kFirstNames = {
    "Adam",  "Bella", "Carl",   "Dana",  "Eric",   "Fiona", "Gavin", "Hana",    "Ivan",
    "Julia", "Kevin", "Laura",  "Marco", "Nina",   "Oscar", "Paula", "Quentin", "Rosa",
    "Simon", "Tara",  "Ulrich", "Vera",  "Walter", "Xenia", "Yusuf", "Zoe"};
constexpr std::array<std::string_view, 11> kLastNames = {"Doe",    "Smith",  "Brown", "White",
                                                         "Green",  "Black",  "Blue",  "Yellow",
                                                         "Violet", "Orange", "Indigo"};
constexpr std::array<std::string_view, 12> kOccupations = {
    "Engineer", "Doctor", "Teacher", "Artist", "Scientist", "Lawyer",
    "Musician", "Chef",   "Pilot",   "Nurse",  "Architect", "Farmer"};
struct Place {
  std::string_view country;
  std::string_view city;
  std::string_view region;
};
constexpr std::array<Place, 12> kPlaces = {{{"USA", "Portland", "OR"},
                                            {"Canada", "Halifax", "NS"},
                                            {"UK", "Bristol", "UK"},
                                            {"Australia", "Hobart", "TAS"},
                                            {"New Zealand", "Dunedin", "NZ"},
                                            {"Ireland", "Sligo", "IE"},
                                            {"USA", "Austin", "TX"},
                                            {"Canada", "Regina", "SK"},
                                            {"UK", "Glasgow", "UK"},
                                            {"Australia", "Darwin", "NT"},
                                            {"New Zealand", "Nelson", "NZ"},
                                            {"Ireland", "Kilkenny", "IE"}}};
constexpr std::array<std::string_view, 10> kStreets = {"Elm",   "Oak", "Pine",   "Maple", "Birch",
                                                       "Cedar", "Ash", "Spruce", "Fir",   "Willow"};

// The fields of a generated row; every field is a fixed function of the id.
struct RowFields {
  std::string first;
  std::string last;
  int age;
  std::string occupation;
  Place place;
  std::string email;
  std::string phone;
  std::string address;
};

RowFields GeneratedRow(int id) {
  RowFields row;
  const unsigned u = static_cast<unsigned>(id);
  row.first = kFirstNames[(u * 7) % kFirstNames.size()];
  row.last = kLastNames[(u * 5 + u / 26) % kLastNames.size()];
  row.age = 22 + static_cast<int>((u * 13) % 41);
  row.occupation = kOccupations[(u * 11) % kOccupations.size()];
  row.place = kPlaces[(u * 3 + u / 12) % kPlaces.size()];
  std::string lower_first;
  for (char c : row.first)
    lower_first += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  row.email =
      fmt::format("{}.{}{}@example.com", lower_first,
                  static_cast<char>(std::tolower(static_cast<unsigned char>(row.last[0]))), id);
  row.phone = fmt::format("555-{:04d}", (u * 7919) % 10000);
  row.address = fmt::format("{} {} St, {}, {}", 100 + (u * 37) % 900,
                            kStreets[(u * 3) % kStreets.size()], row.place.city, row.place.region);
  return row;
}

// Splits a seed row into its trimmed cells.
std::vector<std::string> SeedCells(int id) {
  std::vector<std::string> cells;
  std::string_view row = kSeedRows[id - 1];
  size_t start = row.find('|') + 1;
  while (start < row.size()) {
    size_t end = row.find('|', start);
    if (end == std::string_view::npos) break;
    std::string_view cell = row.substr(start, end - start);
    size_t first = cell.find_first_not_of(' ');
    size_t last = cell.find_last_not_of(' ');
    cells.emplace_back(first == std::string_view::npos ? "" : cell.substr(first, last - first + 1));
    start = end + 1;
  }
  return cells;
}

constexpr std::array<std::string_view, 40> kWords = {
    "the",     "river",  "garden",  "quiet",  "morning", "table",   "window",  "letter",
    "bright",  "market", "simple",  "number", "forest",  "bridge",  "careful", "winter",
    "engine",  "paper",  "silver",  "travel", "between", "people",  "answer",  "little",
    "house",   "across", "music",   "yellow", "kitchen", "station", "follow",  "ancient",
    "harbour", "cloud",  "writing", "stone",  "evening", "village", "under",   "patient"};

}  // namespace

std::string TablePreamble() {
  return "You are a helpful assistant in recognizes the content of tables in markdown format. "
         "Here is a table as follows.\n# Table\n\n"
         "| ID | Name | Age | Occupation | Country | Email | Phone Number | Address |\n"
         "|-----|---------------|-----|---------------|---------------|------------------------|"
         "----------------|------------------------------|\n";
}

int SeedTableRows() { return kSeedRowCount; }

std::string TableRow(int id) {
  if (id < 1) throw InternalError(fmt::format("table row {} (rows start at 1)", id));
  if (id <= kSeedRowCount) return std::string(kSeedRows[id - 1]) + "\n";
  RowFields row = GeneratedRow(id);
  return fmt::format("| {} | {} {} | {} | {} | {} | {} | {} | {} |\n", id, row.first, row.last,
                     row.age, row.occupation, row.place.country, row.email, row.phone, row.address);
}

std::string TableDocument(int rows) {
  std::string text = TablePreamble();
  for (int id = 1; id <= rows; ++id) text += TableRow(id);
  return text;
}

std::string TableQuestion(int id, int kind) {
  std::string name;
  if (id <= kSeedRowCount) {
    name = SeedCells(id).at(1);
  } else {
    RowFields row = GeneratedRow(id);
    name = row.first + " " + row.last;
  }
  switch (kind % 5) {
    case 0:
      return fmt::format("Question: what is the age of {0}? Your answer: The age of {0} is ", name);
    case 1:
      return fmt::format("Question: what is the occupation of {0}? Your answer: {0} works as ",
                         name);
    case 2:
      return fmt::format("Question: which country does {0} live in? Your answer: {0} lives in ",
                         name);
    case 3:
      return fmt::format("Question: what is the email address of {0}? Your answer: it is ", name);
    default:
      return fmt::format("Question: what is the phone number of {0}? Your answer: dial ", name);
  }
}

std::string Prose(uint64_t seed, size_t words) {
  std::mt19937_64 random(seed * 0x9E3779B97F4A7C15ull + 1);
  // The first word changes with every seed (for 40 seeds in a row), so prompts built from
  // consecutive seeds differ from their first token after BOS.
  std::string first(kWords[seed % kWords.size()]);
  first[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(first[0])));
  std::string text = fmt::format("{} note {} of the archive:", first, seed);
  for (size_t i = 0; i < words; ++i) {
    text += ' ';
    text += kWords[random() % kWords.size()];
    if (i % 13 == 12) text += '.';
  }
  return text;
}

FittedText FitToTokens(const std::function<std::string(size_t units)>& make, size_t target,
                       const std::function<size_t(const std::string&)>& count, size_t max_units) {
  size_t low = 1;  // the largest known to fit (or 1 when nothing does)
  size_t high = std::max<size_t>(max_units, 1);
  FittedText best{make(1), 1, 0};
  best.tokens = count(best.text);
  if (best.tokens > target) return best;
  std::string text = make(high);
  size_t tokens = count(text);
  if (tokens <= target) return {std::move(text), high, tokens};
  while (high - low > 1) {
    size_t mid = low + (high - low) / 2;
    text = make(mid);
    tokens = count(text);
    if (tokens <= target) {
      low = mid;
      best = {std::move(text), mid, tokens};
    } else {
      high = mid;
    }
  }
  return best;
}

}  // namespace reprise::bench
