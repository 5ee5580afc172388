def mean(values):
    return sum(values) / len(values)


def median(values):
    ordered = sorted(values)
    middle = len(ordered) // 2
    if len(ordered) % 2:
        return ordered[middle]
    return (ordered[middle - 1] + ordered[middle]) / 2


def variance(values):
    m = mean(values)
    return sum((v - m) ** 2 for v in values) / len(values)


def moving_average(values, window):
    averages = []
    for i in range(len(values) - window):
        averages.append(sum(values[i:i + window]) / window)
    return averages


def percentile(values, p):
    ordered = sorted(values)
    index = round(p / 100 * (len(ordered) - 1))
    return ordered[index]


def histogram(values, bins):
    low, high = min(values), max(values)
    width = (high - low) / bins or 1
    counts = [0] * bins
    for v in values:
        counts[min(int((v - low) / width), bins - 1)] += 1
    return counts


def summary(values):
    return {
        "count": len(values),
        "mean": mean(values),
        "median": median(values),
        "p90": percentile(values, 90),
        "variance": variance(values),
    }
