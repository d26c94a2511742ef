// Integer interval sets with the interface batsched expects of Batsim's `intervalset`
// library, written over Boost.ICL (Debian's libboost-dev) so that batsched builds where that
// library cannot be had. Semantics follow Batsim's documentation of interval sets: closed
// integer intervals, canonical strings "1-3 5 7".
#pragma once

#include <boost/icl/closed_interval.hpp>
#include <boost/icl/interval_set.hpp>

#include <algorithm>
#include <functional>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

struct IntervalSet
{
    typedef boost::icl::closed_interval<int, std::less> ClosedInterval;
    typedef boost::icl::interval_set<int, std::less, ClosedInterval> Set;
    typedef Set::element_const_iterator element_const_iterator;
    typedef Set::const_iterator const_iterator;

    IntervalSet() {}
    IntervalSet(const ClosedInterval & interval) { set.insert(interval); }
    IntervalSet(const IntervalSet & other) : set(other.set) {}
    IntervalSet(int integer) { set.insert(integer); }

    element_const_iterator elements_begin() const { return boost::icl::elements_begin(set); }
    element_const_iterator elements_end() const { return boost::icl::elements_end(set); }
    const_iterator intervals_begin() const { return set.begin(); }
    const_iterator intervals_end() const { return set.end(); }

    void clear() { set.clear(); }
    void insert(const IntervalSet & other) { set += other.set; }
    void insert(ClosedInterval interval) { set.insert(interval); }
    void insert(int integer) { set.insert(integer); }
    void remove(const IntervalSet & other) { set -= other.set; }
    void remove(ClosedInterval interval) { set -= interval; }
    void remove(int integer) { set -= integer; }

    /// The `n` smallest elements; throws when there are fewer.
    IntervalSet left(unsigned int n) const
    {
        if (size() < n)
            throw std::out_of_range("IntervalSet::left(" + std::to_string(n) + ") on a set of "
                                    + std::to_string(size()) + " elements");
        IntervalSet res;
        unsigned int taken = 0;
        for (auto it = intervals_begin(); it != intervals_end() && taken < n; ++it)
        {
            unsigned int width = it->upper() - it->lower() + 1;
            unsigned int take = std::min(width, n - taken);
            res.insert(ClosedInterval(it->lower(), it->lower() + (int)take - 1));
            taken += take;
        }
        return res;
    }

    /// `n` elements drawn at random; throws when there are fewer.
    IntervalSet random_pick(unsigned int n) const
    {
        if (size() < n)
            throw std::out_of_range("IntervalSet::random_pick(" + std::to_string(n)
                                    + ") on a set of " + std::to_string(size()) + " elements");
        std::vector<int> all(elements_begin(), elements_end());
        std::mt19937 rng(std::random_device{}());
        std::shuffle(all.begin(), all.end(), rng);
        IntervalSet res;
        for (unsigned int i = 0; i < n; ++i)
            res.insert(all[i]);
        return res;
    }

    /// The widest interval (the first of equals), or `intervals_end()` when empty.
    const_iterator biggest_interval() const
    {
        const_iterator best = intervals_end();
        int best_width = 0;
        for (auto it = intervals_begin(); it != intervals_end(); ++it)
        {
            int width = it->upper() - it->lower() + 1;
            if (width > best_width)
            {
                best = it;
                best_width = width;
            }
        }
        return best;
    }

    int first_element() const
    {
        if (is_empty())
            throw std::out_of_range("IntervalSet::first_element on an empty set");
        return intervals_begin()->lower();
    }

    unsigned int size() const { return (unsigned int)boost::icl::cardinality(set); }
    bool is_empty() const { return set.empty(); }
    bool contains(int integer) const { return boost::icl::contains(set, integer); }
    bool contains(const ClosedInterval & interval) const { return boost::icl::contains(set, interval); }
    bool is_subset_of(const IntervalSet & other) const { return boost::icl::contains(other.set, set); }

    /// "[1,3]∪[7]" by default.
    std::string to_string_brackets(const std::string & union_str = "∪",
                                   const std::string & opening = "[",
                                   const std::string & closing = "]",
                                   const std::string & sep = ",") const
    {
        if (is_empty())
            return opening + closing;
        std::string out;
        for (auto it = intervals_begin(); it != intervals_end(); ++it)
        {
            if (it != intervals_begin())
                out += union_str;
            out += opening + std::to_string(it->lower());
            if (it->upper() != it->lower())
                out += sep + std::to_string(it->upper());
            out += closing;
        }
        return out;
    }

    /// "1-3,7" by default; Batsim's protocol uses `sep = " "`.
    std::string to_string_hyphen(const std::string & sep = ",", const std::string & joiner = "-") const
    {
        std::string out;
        for (auto it = intervals_begin(); it != intervals_end(); ++it)
        {
            if (it != intervals_begin())
                out += sep;
            out += std::to_string(it->lower());
            if (it->upper() != it->lower())
                out += joiner + std::to_string(it->upper());
        }
        return out;
    }

    /// "1,2,3,7" by default.
    std::string to_string_elements(const std::string & sep = ",") const
    {
        std::string out;
        for (auto it = elements_begin(); it != elements_end(); ++it)
        {
            if (it != elements_begin())
                out += sep;
            out += std::to_string(*it);
        }
        return out;
    }

    IntervalSet & operator=(const IntervalSet & other) { set = other.set; return *this; }
    IntervalSet & operator=(const ClosedInterval & interval) { set.clear(); set.insert(interval); return *this; }
    bool operator==(const IntervalSet & other) const { return set == other.set; }
    bool operator!=(const IntervalSet & other) const { return !(set == other.set); }
    IntervalSet & operator&=(const IntervalSet & other) { set &= other.set; return *this; }
    IntervalSet & operator-=(const IntervalSet & other) { set -= other.set; return *this; }
    IntervalSet & operator+=(const IntervalSet & other) { set += other.set; return *this; }
    IntervalSet operator-(const IntervalSet & other) const { IntervalSet r(*this); r -= other; return r; }
    IntervalSet operator+(const IntervalSet & other) const { IntervalSet r(*this); r += other; return r; }
    IntervalSet operator&(const IntervalSet & other) const { IntervalSet r(*this); r &= other; return r; }

    /// The element at `index` in ascending order.
    int operator[](int index) const
    {
        if (index < 0 || index >= (int)size())
            throw std::out_of_range("IntervalSet[" + std::to_string(index) + "] on a set of "
                                    + std::to_string(size()) + " elements");
        for (auto it = intervals_begin(); it != intervals_end(); ++it)
        {
            int width = it->upper() - it->lower() + 1;
            if (index < width)
                return it->lower() + index;
            index -= width;
        }
        throw std::logic_error("unreachable");
    }

    static IntervalSet empty_interval_set() { return IntervalSet(); }

    /// Parses "1-3,7" (by default) or Batsim's "1-3 7" with `sep = " "`.
    static IntervalSet from_string_hyphen(const std::string & str, const std::string & sep = ",",
                                          const std::string & joiner = "-")
    {
        IntervalSet res;
        std::string::size_type pos = 0;
        while (pos <= str.size())
        {
            std::string::size_type end = str.find_first_of(sep, pos);
            if (end == std::string::npos)
                end = str.size();
            std::string part = str.substr(pos, end - pos);
            pos = end + 1;
            if (part.empty())
                continue;
            std::string::size_type dash = part.find_first_of(joiner);
            if (dash == std::string::npos)
                res.insert(std::stoi(part));
            else
            {
                int a = std::stoi(part.substr(0, dash));
                int b = std::stoi(part.substr(dash + 1));
                if (a > b)
                    throw std::invalid_argument("interval '" + part + "': " + std::to_string(a)
                                                + " is greater than " + std::to_string(b));
                res.insert(ClosedInterval(a, b));
            }
        }
        return res;
    }

private:
    Set set;
};
