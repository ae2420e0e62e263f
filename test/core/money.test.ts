// Minor units per currency (src/core/money.ts): pages show and read amounts in the
// currency's own decimal places, ISO 4217's exponent.
import { decimalOf, minorDigits, minorUnitsOf } from '../../src/core/money';

test('each currency has its own decimal places', () => {
  expect([minorDigits('usd'), minorDigits('EUR'), minorDigits('jpy'), minorDigits('krw'), minorDigits('kwd'), minorDigits('bhd')])
    .toEqual([2, 2, 0, 0, 3, 3]);
  expect(minorDigits('zzz')).toBe(2); // unknown to ICU: the common case
  expect(minorDigits(null)).toBe(2);
});

test('minor units shown as decimals, and typed decimals read back, in those places', () => {
  expect([decimalOf(1250, 'usd'), decimalOf(5, 'usd'), decimalOf(500, 'jpy'), decimalOf(1250, 'kwd'), decimalOf(-1250, 'usd')])
    .toEqual(['12.50', '0.05', '500', '1.250', '-12.50']);
  expect([minorUnitsOf('12.5', 'usd'), minorUnitsOf('12,50', 'usd'), minorUnitsOf(' 7 ', 'usd'), minorUnitsOf('500', 'jpy'), minorUnitsOf('1.25', 'kwd')])
    .toEqual([1250, 1250, 700, 500, 1250]);
  // More places than the currency has, signs, words, and empty text are no amount.
  expect([minorUnitsOf('1.50', 'jpy'), minorUnitsOf('1.005', 'usd'), minorUnitsOf('-1', 'usd'), minorUnitsOf('ten', 'usd'), minorUnitsOf('', 'usd')])
    .toEqual([null, null, null, null, null]);
  for (const [currency, minor] of [['usd', 123456], ['jpy', 98765], ['kwd', 1001]] as const) {
    expect(minorUnitsOf(decimalOf(minor, currency), currency)).toBe(minor);
  }
});
